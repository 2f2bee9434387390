"""The PyTorch side: peers of every case, timed exactly as libplugin_bench.so times an enqueue.

PyTorch is imported only by :func:`import_torch`, after the plugin libraries are loaded (see cli.measure).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

from trt_plugin_kit.benchmarks.cases import MIN_REPETITIONS, Case
from trt_plugin_kit.benchmarks.library import BenchError
from trt_plugin_kit.benchmarks.targets import derive


def stats_of(samples: list[float]) -> dict:
    ordered = sorted(samples)

    def percentile(q: float) -> float:
        pos = q * (len(ordered) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(ordered) - 1)
        return ordered[lo] + (pos - lo) * (ordered[hi] - ordered[lo])

    return {
        "median_us": percentile(0.5),
        "p10_us": percentile(0.1),
        "p90_us": percentile(0.9),
        "min_us": ordered[0],
        "max_us": ordered[-1],
        "mean_us": statistics.fmean(ordered),
        "samples": len(ordered),
    }


def rotation_sets(set_bytes: int, l2_bytes: int, max_sets: int) -> int:
    """Same rule as libplugin_bench.so: inputs of all sets together > 2x L2, at least 2 sets."""
    return max(2, min(max_sets, math.ceil((2 * l2_bytes + 1) / max(set_bytes, 1))))


def time_boxed(repetitions: int, estimate_us: float, spin_us: float, max_seconds: float) -> int:
    fit = int(max_seconds * 1e6 / max(estimate_us + spin_us, 1.0))
    return max(min(repetitions, fit), min(repetitions, MIN_REPETITIONS))


class TorchRunner:
    """Times PyTorch ops exactly as libplugin_bench.so times enqueues."""

    def __init__(self, torch, l2_bytes: int, spin_us: float, max_seconds: float, max_sets: int):
        self.torch = torch
        self.F = torch.nn.functional
        self.l2_bytes = l2_bytes
        self.spin_us = spin_us
        self.max_seconds = max_seconds
        self.max_sets = max_sets
        self.stream = torch.cuda.Stream()
        self.spin_cycles = self._calibrate_spin() if spin_us > 0 else 0

    def _calibrate_spin(self) -> int:
        torch = self.torch
        if not hasattr(torch.cuda, "_sleep"):
            print("  note: torch.cuda._sleep is missing: PyTorch peers are timed without the wait kernel")
            return 0
        cycles = 2_000_000
        rates = []
        with torch.cuda.stream(self.stream):
            torch.cuda._sleep(cycles)
            for _ in range(3):
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                torch.cuda._sleep(cycles)
                stop.record()
                stop.synchronize()
                rates.append(cycles / (start.elapsed_time(stop) * 1000.0))
        return max(1, int(statistics.median(rates) * self.spin_us))

    def dtype(self, name: str):
        return {"fp32": self.torch.float32, "fp16": self.torch.float16, "bf16": self.torch.bfloat16}[name]

    def random_slab(self, shape: tuple[int, ...], dtype, sets: int):
        """`sets` tensors of `shape` in one allocation, each at a 256-byte aligned offset, never zero."""
        torch = self.torch
        numel = math.prod(shape)
        element = torch.empty((), dtype=dtype).element_size()
        pitch = -(-numel * element // 256) * 256 // element
        slab = torch.empty(sets * pitch, dtype=dtype, device="cuda").uniform_(-2.0, 2.0)
        slab.masked_fill_(slab.abs() < 1.0 / 64.0, 0.5)
        return [slab[i * pitch : i * pitch + numel].view(shape) for i in range(sets)]

    def peer(self, case: Case, name: str) -> tuple[Callable, list[tuple]]:
        """(function, rotating argument sets) of one PyTorch peer of `case`."""
        torch, F = self.torch, self.F
        dt = self.dtype(case.dtype)
        op = case.torch_op
        sets = rotation_sets(case.input_bytes, self.l2_bytes, self.max_sets)
        columns = [self.random_slab(tuple(s), dt, sets) for s in case.inputs]
        args = list(zip(*columns, strict=True))
        if name == "F.normalize":
            return (lambda x: F.normalize(x, p=2.0, dim=-1, eps=1e-12)), args
        if name == "F.prelu":
            weight = (torch.rand(op["channels"], device="cuda") * 0.25 + 0.05).to(dt)
            return (lambda x: F.prelu(x, weight)), args
        if name == "F.leaky_relu":
            slope = op["slope"]
            return (lambda x: F.leaky_relu(x, slope)), args
        if name == "F.max_pool2d":
            return (lambda x: F.max_pool2d(x, 2, 2)), args
        if name == "F.avg_pool2d":
            return (lambda x: F.avg_pool2d(x, 2, 2)), args
        if name in ("F.linear", "torch.matmul"):
            weight = ((torch.rand(op["m"], op["k"], device="cuda") - 0.5) * 0.1).to(dt)
            bias = ((torch.rand(op["m"], device="cuda") - 0.5) * 1.0).to(dt)
            if name == "F.linear":
                return (lambda x: F.linear(x.flatten(1), weight, bias)), args
            weight_t = weight.t()
            return (lambda x: torch.matmul(x.flatten(1), weight_t)), args
        if name == "F.silu(a)*b":

            def swiglu(x):
                a, b = x.chunk(2, dim=-1)
                return F.silu(a) * b

            return swiglu, args
        if name == "F.rms_norm":
            eps = op["eps"]
            return (lambda x, weight: F.rms_norm(x, weight.shape, weight, eps)), args
        if name == "F.scaled_dot_product_attention":
            causal = op["causal"]
            return (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)), args
        if name == "torch.cat+clone":
            return (lambda a, b: (torch.cat((a, b)), a.clone())), args
        raise BenchError(f"unknown PyTorch peer {name}")

    def _events(self, n: int):
        ev = self.torch.cuda.Event
        return [ev(enable_timing=True) for _ in range(n)], [ev(enable_timing=True) for _ in range(n)]

    def _launch_times(self, launch: Callable[[int], object], warm: int, repetitions: int, shift: int = 0):
        """µs of each timed launch(r + shift), r = 0..reps-1, on self.stream. `warm` untimed launch(r) first
        give the estimate that sizes reps (time_boxed); a spin before each timed launch hides launch cost."""
        (start,), (stop,) = self._events(1)
        start.record()
        for r in range(warm):
            launch(r)
        stop.record()
        stop.synchronize()
        estimate = start.elapsed_time(stop) * 1000.0 / warm
        reps = time_boxed(repetitions, estimate, self.spin_us, self.max_seconds)
        starts, stops = self._events(reps)
        for r in range(reps):
            if self.spin_cycles:
                self.torch.cuda._sleep(self.spin_cycles)
            starts[r].record()
            launch(r + shift)
            stops[r].record()
        self.stream.synchronize()
        return [a.elapsed_time(b) * 1000.0 for a, b in zip(starts, stops, strict=True)]

    def time(self, fn: Callable, args: list[tuple], repetitions: int, graph_batch: int) -> dict:
        torch = self.torch
        sets = len(args)
        result = {"rotation_sets": sets}
        torch.cuda.synchronize()  # the inputs were made on the default stream; ours does not wait for it
        with torch.cuda.stream(self.stream):
            if graph_batch == 0:
                # Timed launch r takes input set r + 1, one past the warm-up's.
                warm = max(5, min(sets, 200))
                samples = self._launch_times(lambda r: fn(*args[r % sets]), warm, repetitions, shift=1)
                result["graphs"] = 0
            else:
                for r in range(3):  # eager warm-up before capture (cuBLAS/cuDNN handles, workspaces)
                    fn(*args[r % sets])
                self.stream.synchronize()
                count = -(-sets // graph_batch)
                graphs, keep, pool = [], [], None
                for g in range(count):
                    graph = torch.cuda.CUDAGraph()
                    graph.capture_begin(pool=pool)
                    try:
                        keep.append([fn(*args[(g * graph_batch + i) % sets]) for i in range(graph_batch)])
                    finally:
                        graph.capture_end()
                    if pool is None:
                        pool = graph.pool()  # one memory pool for all graphs of the measurement
                    graphs.append(graph)
                replays = self._launch_times(lambda r: graphs[r % count].replay(), max(3, count), repetitions)
                samples = [t / graph_batch for t in replays]
                result["graphs"] = count
                del graphs, keep
        result.update(stats_of(samples))
        return result

    def copy(self, nbytes: int, repetitions: int) -> dict:
        torch = self.torch
        src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").uniform_(-2.0, 2.0)
        dst = torch.empty_like(src)
        result = self.time(lambda a, b: b.copy_(a), [(src, dst)], repetitions, 0)
        del src, dst
        self.release()
        return result

    def release(self) -> None:
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()


def import_torch(args):
    if args.no_torch:
        return None, "--no-torch"
    try:
        import torch
    except ImportError as error:
        return None, f"PyTorch is not importable: {error}"
    if not torch.cuda.is_available():
        return None, "torch.cuda.is_available() is False"
    # FP32 matrix products in FP32, as the plugin. Only the legacy setters: mixing them with
    # set_float32_matmul_precision / fp32_precision makes PyTorch >= 2.9 refuse to read the flags back.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.cuda.init()
    return torch, None


def time_peer(runner: TorchRunner, case: Case, name: str, repetitions: int, copy_gbps: float | None) -> dict:
    """One PyTorch peer of `case`, timed like the plugin; an error is recorded, not raised."""
    peer = {"name": name, "kind": "torch"}
    try:
        fn, peer_args = runner.peer(case, name)
        peer.update(
            derive(
                runner.time(fn, peer_args, repetitions, case.graph_batch),
                case.bytes_moved,
                case.flops,
                copy_gbps,
            )
        )
    except Exception as error:  # recorded with the case; the run goes on with the next one
        peer["error"] = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:300]}"
    finally:
        runner.release()
    return peer
