"""``--verify``: runs a freshly built engine on the sample digits, the validation split and random vectors,
and compares it with the CPU reference (the NumPy evaluator running the graph the engine was built from)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from tritonclient.utils import triton_to_np_dtype

from trt_plugin_kit.engines.consistency import L2NORM_DIM_RANGE
from trt_plugin_kit.engines.cuda_runtime import CudaRuntime
from trt_plugin_kit.engines.errors import BuildFailure, UsageError
from trt_plugin_kit.engines.jobs import BuildJob
from trt_plugin_kit.interface import L2NORM, L2NORM_INPUT, L2NORM_OUTPUT, MNIST, MNIST_INPUT, MNIST_OUTPUT
from trt_plugin_kit.models import export, mnist, onnx_eval

L2NORM_VERIFY_DIMS = (1, 7, 128, 1000, export.L2NORM_MAX_DIM)


class EngineRunner:
    """Runs a deserialized engine on host arrays (device buffers reused between calls of the same size)."""

    def __init__(self, trt, cuda: CudaRuntime, engine):
        self.trt, self.cuda, self.engine = trt, cuda, engine
        self.context = engine.create_execution_context()
        self.stream = cuda.create_stream()
        self.buffers: dict[str, tuple[int, int]] = {}
        self.names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self.inputs = [n for n in self.names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]

    def _buffer(self, name: str, nbytes: int) -> int:
        pointer, size = self.buffers.get(name, (0, 0))
        if size < nbytes:
            if pointer:
                self.cuda.free(pointer)
            pointer, size = self.cuda.malloc(nbytes), nbytes
            self.buffers[name] = (pointer, size)
            self.context.set_tensor_address(name, pointer)
        return pointer

    def prepare(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for name in self.inputs:
            array = np.ascontiguousarray(
                feeds[name], dtype=self.trt.nptype(self.engine.get_tensor_dtype(name))
            )
            if not self.context.set_input_shape(name, array.shape):
                raise BuildFailure(f"the engine does not accept '{name}' of shape {array.shape}")
            self.cuda.to_device(self._buffer(name, array.nbytes), array)
        outputs = {}
        for name in self.names:
            if name in self.inputs:
                continue
            shape = tuple(self.context.get_tensor_shape(name))
            outputs[name] = np.empty(shape, dtype=self.trt.nptype(self.engine.get_tensor_dtype(name)))
            self._buffer(name, outputs[name].nbytes)
        return outputs

    def execute(self) -> None:
        if not self.context.execute_async_v3(self.stream):
            raise BuildFailure("execute_async_v3 failed")
        self.cuda.synchronize(self.stream)

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = self.prepare(feeds)
        self.execute()
        for name, array in outputs.items():
            self.cuda.to_host(array, self.buffers[name][0])
        return outputs

    def latency_ms(self, feeds: dict[str, np.ndarray], runs: int) -> float:
        self.prepare(feeds)
        for _ in range(min(10, runs)):
            self.execute()
        started = time.perf_counter()
        for _ in range(runs):
            self.execute()
        return (time.perf_counter() - started) * 1000.0 / runs

    def close(self) -> None:
        for pointer, _ in self.buffers.values():
            self.cuda.free(pointer)
        self.buffers.clear()
        self.cuda.destroy_stream(self.stream)


# CPU reference vs engine: largest |difference| allowed and share of identical predictions, per precision.
VERIFY_TOLERANCES = {
    "fp32": {"max_abs": 1e-4, "agreement": 1.0},
    "fp16": {"max_abs": 5e-2, "agreement": 0.995},
    "int8": {"max_abs": 2e-1, "agreement": 0.99},
}
MIN_ACCURACY = 0.98


def compare_with_reference(
    engine_out: np.ndarray, reference_out: np.ndarray, precision: str
) -> tuple[bool, str]:
    """PASS/FAIL of engine outputs against the CPU reference, with the figures that decided it."""
    tolerance = VERIFY_TOLERANCES[precision]
    difference = np.abs(engine_out.astype(np.float64) - reference_out.astype(np.float64))
    max_abs = float(difference.max()) if difference.size else 0.0
    line = f"max |diff| {max_abs:.3g} (limit {tolerance['max_abs']:g}), mean {float(difference.mean()):.3g}"
    ok = max_abs <= tolerance["max_abs"]
    if engine_out.ndim == 2 and engine_out.shape[1] == mnist.NUM_CLASSES:
        agreement = float(np.mean(engine_out.argmax(axis=1) == reference_out.argmax(axis=1)))
        line += f", same prediction {agreement:.2%} (min {tolerance['agreement']:.1%})"
        ok = ok and agreement >= tolerance["agreement"]
    return ok, line


def load_sample_digits(samples_dir: Path) -> np.ndarray:
    """``samples/digits/0.png`` .. ``9.png`` preprocessed: float32 [10, 1, 28, 28]."""
    paths = [samples_dir / f"{digit}.png" for digit in range(10)]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise UsageError(f"--verify needs the sample digits: missing {', '.join(missing)}")
    return np.stack([mnist.preprocess_image(p) for p in paths])


def verify_mnist(runner: EngineRunner, job: BuildJob, args, reference_graph) -> bool:
    ok = True
    digits = load_sample_digits(args.samples_dir)
    for digit in range(10):
        probabilities = runner.run({MNIST_INPUT: digits[digit : digit + 1]})[MNIST_OUTPUT][0]
        predicted = int(probabilities.argmax())
        passed = predicted == digit
        ok &= passed
        status = "PASS" if passed else "FAIL"
        print(
            f"[I] digit {digit}: predicted {predicted} (probability {probabilities[predicted]:.4f})  {status}"
        )
    try:
        split = mnist.load_split(args.mnist_dir)
    except (FileNotFoundError, mnist.IdxFormatError) as error:
        raise UsageError(f"--verify needs the MNIST dev data: {error} (use --mnist-dir)") from error
    images = mnist.to_tensor(split.validation_images)
    batch = job.config.max_batch_size
    outputs = [
        runner.run({MNIST_INPUT: images[i : i + batch]})[MNIST_OUTPUT] for i in range(0, len(images), batch)
    ]
    engine_out = np.concatenate(outputs)
    accuracy = float(np.mean(engine_out.argmax(axis=1) == split.validation_labels))
    passed = accuracy >= MIN_ACCURACY
    ok &= passed
    print(
        f"[I] validation: {int(round(accuracy * len(images)))}/{len(images)} correct, "
        f"accuracy {accuracy:.2%} (min {MIN_ACCURACY:.0%})  {'PASS' if passed else 'FAIL'}"
    )
    reference_out = onnx_eval.run(reference_graph, {MNIST_INPUT: images})[MNIST_OUTPUT]
    passed, line = compare_with_reference(engine_out, reference_out, job.recipe.precision)
    ok &= passed
    print(
        f"[I] CPU reference (NumPy evaluator, {reference_graph.graph.name}): {line}  "
        f"{'PASS' if passed else 'FAIL'}"
    )
    latency = runner.latency_ms({MNIST_INPUT: digits[:1]}, args.latency_runs)
    print(f"[I] Average over {args.latency_runs} runs is {latency:.5f} ms (batch 1).")
    return ok


def verify_l2norm(runner: EngineRunner, job: BuildJob, args, reference_graph) -> bool:
    ok = True
    rng = np.random.default_rng(0)
    # FP16 (flag or graph) runs the plugin in half precision; INT8 l2norm engines are FP32 (no INT8 layer).
    tolerance = 2e-3 if job.recipe.precision == "fp16" else 1e-5
    for dim in L2NORM_VERIFY_DIMS:
        batch = min(8, job.config.max_batch_size)
        vectors = (rng.normal(size=(batch, dim)) * rng.uniform(1e-2, 1e2, size=(batch, 1))).astype(np.float32)
        vectors[0] = 0.0
        engine_out = runner.run({L2NORM_INPUT: vectors})[L2NORM_OUTPUT]
        reference_out = onnx_eval.run(reference_graph, {L2NORM_INPUT: vectors})[L2NORM_OUTPUT]
        max_abs = float(np.abs(engine_out.astype(np.float64) - reference_out).max())
        passed = max_abs <= tolerance
        ok &= passed
        print(f"[I] vectors [{batch}, {dim}]: max |diff| vs CPU reference {max_abs:.3g} "
              f"(limit {tolerance:g})  {'PASS' if passed else 'FAIL'}")  # fmt: skip
    feeds = {L2NORM_INPUT: rng.normal(size=(1, L2NORM_DIM_RANGE[1])).astype(np.float32)}
    latency = runner.latency_ms(feeds, args.latency_runs)
    print(
        f"[I] Average over {args.latency_runs} runs is {latency:.5f} ms "
        f"(batch 1, length {L2NORM_DIM_RANGE[1]})."
    )
    return ok


def generated_feeds(job: BuildJob, batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs for a model of yours: ``batch`` items of the profile's opt shape, floats uniform in [-1, 1)
    (integers in 0..9), seeded: what --verify sends where no data of the model is known."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for tensor in job.config.inputs:
        shape = (batch, *job.profile[tensor.name][1][1:])
        dtype = np.dtype(triton_to_np_dtype(tensor.data_type.removeprefix("TYPE_")))
        if np.issubdtype(dtype, np.floating):
            feeds[tensor.name] = rng.uniform(-1, 1, size=shape).astype(dtype)
        else:
            feeds[tensor.name] = rng.integers(0, 10, size=shape).astype(dtype)
    return feeds


def verify_generic(runner: EngineRunner, job: BuildJob, args, reference_graph) -> bool:
    """A model of yours: batch 1 and the largest batch of generated inputs against the CPU reference (the
    same graph, plugin nodes by their NumPy references), with the precision's tolerance."""
    ok = True
    for batch in sorted({1, job.config.max_batch_size}):
        feeds = generated_feeds(job, batch, seed=batch)
        engine_out = runner.run(feeds)
        reference_out = onnx_eval.run(reference_graph, feeds)
        for tensor in job.config.outputs:
            passed, line = compare_with_reference(
                engine_out[tensor.name], reference_out[tensor.name], job.recipe.precision
            )
            ok &= passed
            print(
                f"[I] batch {batch}, '{tensor.name}' vs CPU reference: {line}  {'PASS' if passed else 'FAIL'}"
            )
    latency = runner.latency_ms(generated_feeds(job, 1), args.latency_runs)
    print(f"[I] Average over {args.latency_runs} runs is {latency:.5f} ms (batch 1).")
    return ok


def verify(trt, cuda: CudaRuntime, engine, job: BuildJob, args) -> bool:
    # The CPU reference runs the graph the engine was built from (FP16-by-flag engines: the FP32 graph).
    reference_graph = job.onnx_model if not job.network_api else export.build_l2norm("plugin")
    if job.network_api and job.recipe.graph == "fp16":
        reference_graph = export.to_fp16(reference_graph)
    print(f"&&&& RUNNING trt_plugin_kit.build_engines {job.title} on {cuda.device_name()}")
    runner = EngineRunner(trt, cuda, engine)
    try:
        verifier = {MNIST: verify_mnist, L2NORM: verify_l2norm}.get(job.model, verify_generic)
        ok = verifier(runner, job, args, reference_graph)
    finally:
        runner.close()
    print(f"&&&& {'PASSED' if ok else 'FAILED'} trt_plugin_kit.build_engines {job.title}")
    return ok
