"""How a requested precision (fp32, fp16, int8) is built on a given TensorRT version.

TensorRT 10: FP16 is a builder flag (or, with ``--strongly-typed``, the FP16 graph); TensorRT 11 and
TensorRT-RTX: networks are strongly typed and precision comes from the graph's types. INT8 is always the INT8
graph (pools between Q/DQ) built strongly typed. l2norm has no INT8 layer: its ``int8`` engine is FP32.
"""

from __future__ import annotations

from dataclasses import dataclass

from trt_plugin_kit.engines.errors import EnvironmentMissing, UsageError
from trt_plugin_kit.interface import MNIST, PRECISIONS


@dataclass(frozen=True)
class PrecisionRecipe:
    """How one requested precision is built on one TensorRT major version."""

    precision: str  # what the user asked for
    graph: str  # ONNX variant whose types are built: fp32 | fp16 | int8
    strongly_typed: bool
    builder_flags: tuple[str, ...] = ()  # trt.BuilderFlag members to set
    cleared_flags: tuple[str, ...] = ()  # trt.BuilderFlag members to clear
    note: str = ""


def choose_recipe(
    precision: str, trt_major: int, model: str, strongly_typed: bool = False
) -> PrecisionRecipe:
    """The recipe for ``precision`` on TensorRT ``trt_major`` (TensorRT-RTX follows TensorRT 11's rules)."""
    if precision not in PRECISIONS:
        raise UsageError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if trt_major < 10:
        raise EnvironmentMissing(
            f"TensorRT {trt_major}.x is too old: the plugins are IPluginV3 (TensorRT >= 10)"
        )
    note = ""
    if precision == "int8" and model != MNIST:
        precision_built, note = "fp32", f"{model} has no INT8 layer (no pool): built in FP32"
    else:
        precision_built = precision
    no_tf32 = ("TF32",)  # FP32 means FP32: TF32 would make the comparison with the CPU reference loose
    if precision_built == "fp32":
        return PrecisionRecipe(precision, "fp32", trt_major >= 11, (), no_tf32, note)
    if precision_built == "int8":
        return PrecisionRecipe(
            precision, "int8", True, (), no_tf32, "pools INT8 between Q/DQ (graph types), the rest FP32"
        )
    if trt_major >= 11 or strongly_typed:  # fp16
        return PrecisionRecipe(precision, "fp16", True, (), (), "FP16 graph, strongly typed")
    return PrecisionRecipe(precision, "fp32", False, ("FP16",), (), "FP32 graph with the FP16 builder flag")


def parse_trt_major(version: str) -> int:
    try:
        return int(version.split(".")[0])
    except ValueError:
        raise UsageError(f"cannot read a TensorRT version from {version!r}") from None
