"""Any served model's tensors, from what the server reports: the shared part of `python -m clients tensor`
and the load tests' request kind for any model (loadtests/any_model.py).

:class:`ModelIO` is built from the model's metadata and configuration (either protocol's JSON form:
gRPC writes int64 as strings): tensor names, datatypes, per-item dims (-1: any length) and max_batch_size
(0: no batch dimension). Input data comes from a file (:func:`read_inputs`: ``.npy`` for a one-input model,
``.npz`` with one array per input name) or is generated uniformly in a range (:func:`generate_inputs`); both
are checked against the model before anything is sent. :func:`output_problems` says what is wrong with a
response.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tritonclient.utils import np_to_triton_dtype, triton_to_np_dtype


@dataclass(frozen=True)
class TensorIO:
    name: str
    datatype: str  # KServe name: FP32, INT64, BYTES ...
    dims: tuple[int, ...]  # per item (without the batch dimension); -1: any length

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(triton_to_np_dtype(self.datatype))

    def describe(self, batching: bool) -> str:
        dims = ", ".join("any" if d < 0 else str(d) for d in self.dims)
        return f"{self.name} {self.datatype} [{'batch, ' if batching else ''}{dims}]"


@dataclass(frozen=True)
class ModelIO:
    name: str
    max_batch_size: int
    inputs: tuple[TensorIO, ...]
    outputs: tuple[TensorIO, ...]

    @property
    def batching(self) -> bool:
        return self.max_batch_size > 0

    @classmethod
    def from_server(cls, metadata: dict, config: dict) -> ModelIO:
        """From get_model_metadata / get_model_config as JSON (HTTP dicts, or gRPC's ``as_json=True``)."""
        config = config.get("config", config) if isinstance(config.get("config"), dict) else config
        max_batch_size = int(config.get("max_batch_size", 0) or 0)

        def tensors(key: str) -> tuple[TensorIO, ...]:
            found = []
            for tensor in metadata.get(key, []):
                shape = [int(d) for d in tensor.get("shape", [])]
                found.append(
                    TensorIO(
                        tensor["name"], tensor["datatype"], tuple(shape[1:] if max_batch_size else shape)
                    )
                )
            return tuple(found)

        return cls(
            metadata.get("name", config.get("name", "")),
            max_batch_size,
            tensors("inputs"),
            tensors("outputs"),
        )

    def describe(self) -> str:
        batch = f"max_batch_size {self.max_batch_size}" if self.batching else "no batching"
        ins = "; ".join(t.describe(self.batching) for t in self.inputs)
        outs = "; ".join(t.describe(self.batching) for t in self.outputs)
        return f"model '{self.name}' ({batch}): inputs {ins}; outputs {outs}"


def value_range(text: str) -> tuple[float, float]:
    """LOW:HIGH, a range for generated inputs."""
    try:
        low, high = (float(part) for part in str(text).split(":"))
    except ValueError:
        raise ValueError(f"expected LOW:HIGH, two numbers, got {text!r}") from None
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ValueError(f"expected finite LOW < HIGH, got {text!r}")
    return low, high


class ModelDataError(ValueError):
    """Input data that does not fit the model (the message says which tensor and why)."""


def _item_shape(tensor: TensorIO, dim: int) -> tuple[int, ...]:
    return tuple(dim if d < 0 else d for d in tensor.dims)


def check_inputs(model: ModelIO, arrays: dict[str, np.ndarray]) -> int:
    """Every input present, of the model's dtype (numbers cast exactly), rank and fixed dims, one count of
    items; returns that count (1 for a model without batching)."""
    missing = [t.name for t in model.inputs if t.name not in arrays]
    unknown = sorted(set(arrays) - {t.name for t in model.inputs})
    if missing or unknown:
        raise ModelDataError(
            f"{model.name} takes inputs {[t.name for t in model.inputs]}; the data has "
            f"{sorted(arrays)} (missing {missing}, unknown {unknown})"
        )
    counts = set()
    for tensor in model.inputs:
        array = arrays[tensor.name]
        item = array.shape[1:] if model.batching else array.shape
        if len(item) != len(tensor.dims) or any(
            w >= 0 and g != w for g, w in zip(item, tensor.dims, strict=True)
        ):
            raise ModelDataError(
                f"input '{tensor.name}' has shape {list(array.shape)}, {model.name} takes "
                f"{tensor.describe(model.batching)}"
            )
        if array.dtype != tensor.dtype:
            cast = array.astype(tensor.dtype)
            if array.dtype.kind not in "biuf" or not np.array_equal(
                cast.astype(array.dtype), array, equal_nan=True
            ):
                raise ModelDataError(
                    f"input '{tensor.name}' is {array.dtype}, {model.name} takes {tensor.datatype}: "
                    "not every value converts exactly"
                )
            arrays[tensor.name] = cast
        counts.add(len(array) if model.batching else 1)
    if len(counts) > 1:
        raise ModelDataError(f"the inputs hold different numbers of items {sorted(counts)}")
    return counts.pop()


def read_inputs(model: ModelIO, path: str | Path) -> dict[str, np.ndarray]:
    """``.npy`` (a one-input model) or ``.npz`` (one array per input name), checked; never pickles."""
    path = Path(path)
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                arrays = {name: archive[name] for name in archive.files}
        elif path.suffix == ".npy":
            if len(model.inputs) != 1:
                raise ModelDataError(
                    f"{model.name} has {len(model.inputs)} inputs: give an .npz with one array per input "
                    f"name ({', '.join(t.name for t in model.inputs)})"
                )
            arrays = {model.inputs[0].name: np.load(path, allow_pickle=False)}
        else:
            raise ModelDataError(f"{path}: give a .npy or .npz file")
    except (OSError, ValueError) as error:
        if isinstance(error, ModelDataError):
            raise
        raise ModelDataError(f"{path}: not a readable NumPy file ({error})") from error
    check_inputs(model, arrays)
    return arrays


def generate_inputs(
    model: ModelIO, items: int, low: float = -1.0, high: float = 1.0, dim: int = 16, seed: int = 0
) -> dict[str, np.ndarray]:
    """``items`` items per input, uniform in [low, high) (integers: low..high), dynamic dims ``dim`` long."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for tensor in model.inputs:
        shape = ((items,) if model.batching else ()) + _item_shape(tensor, dim)
        if tensor.datatype == "BYTES":
            raise ModelDataError(f"input '{tensor.name}' is BYTES: give the data in a file")
        if tensor.dtype.kind == "b":
            arrays[tensor.name] = rng.integers(0, 2, size=shape).astype(bool)
        elif tensor.dtype.kind in "iu":
            info = np.iinfo(tensor.dtype)
            lo, hi = max(int(np.ceil(low)), info.min), min(int(np.floor(high)), info.max)
            arrays[tensor.name] = rng.integers(lo, hi + 1, size=shape).astype(tensor.dtype)
        else:
            arrays[tensor.name] = rng.uniform(low, high, size=shape).astype(tensor.dtype)
    return arrays


def output_problems(model: ModelIO, batch: int, outputs: dict[str, np.ndarray]) -> list[str]:
    """What is wrong with a response to ``batch`` items: missing outputs, other dtypes, shapes."""
    problems = []
    for tensor in model.outputs:
        array = outputs.get(tensor.name)
        if array is None:
            problems.append(f"no output '{tensor.name}'")
            continue
        if np_to_triton_dtype(array.dtype) != tensor.datatype and not (
            tensor.datatype == "BYTES" and array.dtype == np.object_
        ):
            problems.append(f"output '{tensor.name}' is {array.dtype}, the model declares {tensor.datatype}")
        shape = array.shape[1:] if model.batching else array.shape
        if (
            (model.batching and array.shape[:1] != (batch,))
            or len(shape) != len(tensor.dims)
            or any(w >= 0 and g != w for g, w in zip(shape, tensor.dims, strict=True))
        ):
            problems.append(
                f"output '{tensor.name}' has shape {list(array.shape)} for {batch} item(s), the model "
                f"declares {tensor.describe(model.batching)}"
            )
    return problems
