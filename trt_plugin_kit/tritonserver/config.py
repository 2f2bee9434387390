"""Reads Triton ``config.pbtxt`` files exactly as Triton does: ``google.protobuf.text_format`` with Triton's
own ``ModelConfig`` message (``model_config_pb2``, shipped in tritonclient).

:func:`load_model_config` returns a :class:`ModelConfig` with the parts that an engine must match:
platform/backend, ``max_batch_size``, the inputs and outputs (name, data type, dims, reshape) and the warmup
samples. A config Triton would refuse (syntax, unknown fields or enum values, a field given twice) is refused
here too, with the file, line and column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2


class ModelConfigError(ValueError):
    """A config.pbtxt that Triton would not parse, or one that lacks what an engine needs."""


@dataclass(frozen=True)
class TensorConfig:
    name: str
    data_type: str  # Triton type name, e.g. "TYPE_FP32"
    dims: tuple[int, ...]  # without the batch dimension when max_batch_size > 0
    reshape: tuple[int, ...] | None = None  # the model's own shape when it differs from dims

    @property
    def model_dims(self) -> tuple[int, ...]:
        """The dims the model (engine) sees: ``reshape`` when given, else ``dims``."""
        return self.reshape if self.reshape is not None else self.dims


@dataclass(frozen=True)
class WarmupSample:
    name: str
    batch_size: int
    input_dims: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelConfig:
    name: str
    platform: str
    backend: str
    max_batch_size: int
    inputs: tuple[TensorConfig, ...]
    outputs: tuple[TensorConfig, ...]
    warmup: tuple[WarmupSample, ...] = ()
    path: Path | None = None

    @property
    def is_tensorrt(self) -> bool:
        return self.platform == "tensorrt_plan" or self.backend == "tensorrt"


def _tensor(message, where: str) -> TensorConfig:
    if not message.name:
        raise ModelConfigError(f"{where}: every input/output needs a name")
    reshape = tuple(message.reshape.shape) if message.HasField("reshape") else None
    return TensorConfig(
        message.name, model_config_pb2.DataType.Name(message.data_type), tuple(message.dims), reshape
    )


def model_config_from_text(text: str, path: Path | None = None) -> ModelConfig:
    where = str(path) if path else "config"
    try:
        message = text_format.Parse(text, model_config_pb2.ModelConfig())
    except text_format.ParseError as error:  # "line:column : what", as Triton reports it
        raise ModelConfigError(f"{where}:{error}") from None
    warmup = tuple(
        WarmupSample(
            sample.name,
            sample.batch_size,
            {key: tuple(value.dims) for key, value in sample.inputs.items()},
        )
        for sample in message.model_warmup
    )
    return ModelConfig(
        name=message.name,
        platform=message.platform,
        backend=message.backend,
        max_batch_size=message.max_batch_size,
        inputs=tuple(_tensor(tensor, where) for tensor in message.input),
        outputs=tuple(_tensor(tensor, where) for tensor in message.output),
        warmup=warmup,
        path=path,
    )


def load_model_config(path: str | Path) -> ModelConfig:
    """Reads a ``config.pbtxt``; raises FileNotFoundError or :class:`ModelConfigError` with the file name."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"model configuration not found: {path}")
    return model_config_from_text(path.read_text(), path)
