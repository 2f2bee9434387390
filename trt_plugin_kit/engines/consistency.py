"""Everything an engine must agree on with its Triton ``config.pbtxt``, checked without TensorRT.

The same checks run on the ONNX graph before building, on TensorRT's network after parsing, on the
optimization profile and on the engine after building (:mod:`.builder` turns those into :class:`GraphTensor`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trt_plugin_kit.engines.errors import BuildFailure, UsageError
from trt_plugin_kit.interface import L2NORM
from trt_plugin_kit.models.export import L2NORM_MAX_DIM
from trt_plugin_kit.tritonserver.config import ModelConfig

# Range of the dynamic vector length of l2norm in the optimization profile (min, opt, max).
L2NORM_DIM_RANGE = (1, 512, L2NORM_MAX_DIM)

Profile = dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]  # input -> (min, opt, max)


@dataclass(frozen=True)
class GraphTensor:
    """One I/O tensor of an ONNX graph or an engine: Triton data type name and full shape (-1 = dynamic)."""

    name: str
    is_input: bool
    data_type: str
    shape: tuple[int, ...]


ONNX_TO_TRITON = {
    1: "TYPE_FP32",
    10: "TYPE_FP16",
    3: "TYPE_INT8",
    2: "TYPE_UINT8",
    6: "TYPE_INT32",
    7: "TYPE_INT64",
}
ONNX_TO_TRITON.update({9: "TYPE_BOOL", 16: "TYPE_BF16", 11: "TYPE_FP64"})
TRT_TO_TRITON = {
    "FLOAT": "TYPE_FP32",
    "HALF": "TYPE_FP16",
    "BF16": "TYPE_BF16",
    "INT8": "TYPE_INT8",
    "UINT8": "TYPE_UINT8",
    "INT32": "TYPE_INT32",
    "INT64": "TYPE_INT64",
    "BOOL": "TYPE_BOOL",
}


def onnx_io_specs(model) -> list[GraphTensor]:
    """The graph inputs/outputs of an ONNX model (symbolic dims become -1)."""
    specs = []
    initializers = {init.name for init in model.graph.initializer}
    for is_input, values in ((True, model.graph.input), (False, model.graph.output)):
        for value in values:
            if value.name in initializers:
                continue
            tensor_type = value.type.tensor_type
            shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim)
            data_type = ONNX_TO_TRITON.get(tensor_type.elem_type, f"ONNX_TYPE_{tensor_type.elem_type}")
            specs.append(GraphTensor(value.name, is_input, data_type, shape))
    return specs


def check_io_against_config(specs: Sequence[GraphTensor], config: ModelConfig, what: str) -> None:
    """Raises BuildFailure listing every difference between ``specs`` and the Triton config's I/O."""
    problems = []
    expected = {(t.name, True): t for t in config.inputs} | {(t.name, False): t for t in config.outputs}
    actual = {(s.name, s.is_input): s for s in specs}
    for key in expected.keys() - actual.keys():
        kind = "input" if key[1] else "output"
        problems.append(f"config.pbtxt {kind} '{key[0]}' is not an {kind} of the {what}")
    for key in actual.keys() - expected.keys():
        kind = "input" if key[1] else "output"
        problems.append(f"the {what} has {kind} '{key[0]}' that config.pbtxt does not declare")
    for key in sorted(expected.keys() & actual.keys()):
        tensor, spec = expected[key], actual[key]
        if tensor.data_type != spec.data_type:
            problems.append(
                f"'{tensor.name}': config.pbtxt says {tensor.data_type}, the {what} has {spec.data_type}"
            )
        want = ((-1,) if config.max_batch_size > 0 else ()) + tuple(tensor.model_dims)
        if tuple(spec.shape) != want:
            problems.append(
                f"'{tensor.name}': the {what} has shape {list(spec.shape)}, config.pbtxt needs {list(want)} "
                f"(max_batch_size {config.max_batch_size}, dims {list(tensor.model_dims)})"
            )
    if problems:
        source = config.path or "config.pbtxt"
        raise BuildFailure(f"{what} does not match {source}:\n  - " + "\n  - ".join(problems))


def check_profile_covers_config(profiles: Profile, config: ModelConfig) -> None:
    """The optimization profile must accept batch 1..max_batch_size and every warmup sample of the config."""
    problems = []
    for tensor in config.inputs:
        if tensor.name not in profiles:
            problems.append(f"no optimization profile for input '{tensor.name}'")
            continue
        low, _, high = profiles[tensor.name]
        if config.max_batch_size > 0 and (low[0] > 1 or high[0] < config.max_batch_size):
            problems.append(
                f"'{tensor.name}': profile batch range {low[0]}..{high[0]} does not cover "
                f"1..max_batch_size={config.max_batch_size}"
            )
    for sample in config.warmup:
        for name, dims in sample.input_dims.items():
            if name not in profiles:
                continue
            low, _, high = profiles[name]
            shape = ((sample.batch_size,) if config.max_batch_size > 0 else ()) + tuple(dims)
            inside = len(shape) == len(low) and all(
                lo <= s <= hi for s, lo, hi in zip(shape, low, high, strict=True)
            )
            if not inside:
                problems.append(
                    f"warmup '{sample.name}' sends '{name}' {list(shape)}, outside the profile "
                    f"{list(low)}..{list(high)}"
                )
    if problems:
        raise BuildFailure(
            f"optimization profile vs {config.path or 'config.pbtxt'}:\n  - " + "\n  - ".join(problems)
        )


def profile_shapes(
    model: str,
    config: ModelConfig,
    opt_batch: int | None = None,
    dim_range: tuple[int, int, int] | None = None,
) -> Profile:
    """``{input: (min, opt, max)}``: batch 1..max_batch_size (opt: ``opt_batch`` or the largest), fixed dims
    as configured; a dynamic dim: l2norm's length in :data:`L2NORM_DIM_RANGE`, another model's in
    ``dim_range`` (``--dim-range MIN:OPT:MAX``), which such a model needs."""
    if config.max_batch_size <= 0:
        raise UsageError(f"{config.path}: max_batch_size must be > 0 for {model} (dynamic batch engines)")
    batch_opt = min(opt_batch or config.max_batch_size, config.max_batch_size)
    shapes = {}
    for tensor in config.inputs:
        low, opt, high = [1], [batch_opt], [config.max_batch_size]
        for dim in tensor.model_dims:
            if dim >= 0:
                low.append(dim), opt.append(dim), high.append(dim)
                continue
            if model == L2NORM:
                dim_low, dim_opt, dim_high = L2NORM_DIM_RANGE
            elif dim_range is not None:
                dim_low, dim_opt, dim_high = dim_range
            else:
                raise UsageError(
                    f"{config.path}: '{tensor.name}' has a dynamic dimension; give its range in the "
                    "optimization profile with --dim-range MIN:OPT:MAX"
                )
            low.append(dim_low), opt.append(dim_opt), high.append(dim_high)
        shapes[tensor.name] = (tuple(low), tuple(opt), tuple(high))
    return shapes
