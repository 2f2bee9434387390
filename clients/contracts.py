"""What the clients expect of each served model, and the check of a live model against it.

The expectations are the serving interface (model_repository/README.md: models, tensors, shapes):

  | model              | inputs                        | outputs                                   |
  | mnist              | image FP32 [1, 28, 28]        | probabilities FP32 [10] + labels file     |
  | l2norm             | vector FP32 [-1]              | normalized FP32 [-1]                      |
  | mnist_preprocess   | image_bytes BYTES [1]         | image FP32 [1, 28, 28]                    |
  | mnist_pipeline     | image_bytes BYTES [1]         | probabilities FP32 [10] + labels file     |

all with a batch dimension (max_batch_size > 0). Shapes here are per item, without the batch dimension.
`check_model` compares them with the model's config and metadata before anything is sent, so a wrong
`--model` fails with a list of differences instead of an obscure inference error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trt_plugin_kit.tritonserver.protocol import TensorSpec

# Config data types are spelled TYPE_<x>; metadata and requests use the KServe names.
_CONFIG_TO_KSERVE = {"TYPE_STRING": "BYTES"}


def config_dtype_to_kserve(data_type: str) -> str:
    return _CONFIG_TO_KSERVE.get(data_type, data_type.removeprefix("TYPE_"))


@dataclass(frozen=True)
class ModelContract:
    name: str  # the model's name in the serving interface (default for --model)
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    summary: str = ""


MNIST = ModelContract(
    "mnist",
    inputs=(TensorSpec("image", "FP32", (1, 28, 28)),),
    outputs=(TensorSpec("probabilities", "FP32", (10,), labels=True),),
    summary="MNIST classifier on preprocessed tensors (pixel / 255, white digit on black)",
)
MNIST_PIPELINE = ModelContract(
    "mnist_pipeline",
    inputs=(TensorSpec("image_bytes", "BYTES", (1,)),),
    outputs=(TensorSpec("probabilities", "FP32", (10,), labels=True),),
    summary="ensemble: encoded PNG/JPEG -> mnist_preprocess -> mnist",
)
MNIST_PREPROCESS = ModelContract(
    "mnist_preprocess",
    inputs=(TensorSpec("image_bytes", "BYTES", (1,)),),
    outputs=(TensorSpec("image", "FP32", (1, 28, 28)),),
    summary="decodes PNG/JPEG of any size to the mnist input tensor",
)
L2NORM = ModelContract(
    "l2norm",
    inputs=(TensorSpec("vector", "FP32", (-1,)),),
    outputs=(TensorSpec("normalized", "FP32", (-1,)),),
    summary="L2-normalizes each vector (the l2norm plugin)",
)

CONTRACTS: dict[str, ModelContract] = {c.name: c for c in (MNIST, MNIST_PIPELINE, MNIST_PREPROCESS, L2NORM)}


@dataclass
class ModelCheck:
    """Outcome of comparing a served model with a contract."""

    contract: ModelContract
    problems: list[str] = field(default_factory=list)  # any of these: the client cannot use the model
    warnings: list[str] = field(default_factory=list)  # usable, but something is off (e.g. no labels)
    max_batch_size: int = 0
    # Per-item input shapes as the server declares them (config dims), e.g. a fixed l2norm vector length.
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    labelled_outputs: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return not self.problems


def _shape_problem(kind: str, name: str, expected: tuple[int, ...], actual: list[int]) -> str | None:
    """-1 on the server accepts any size; -1 in the contract accepts whatever fixed size the server has."""
    compatible = len(expected) == len(actual) and all(
        a == -1 or e == -1 or a == e for e, a in zip(expected, actual, strict=False)
    )
    if compatible:
        return None
    return f"{kind} '{name}': shape is {list(actual)}, expected {list(expected)} (per item, -1 = any)"


def _compare_tensors(
    kind: str, expected: tuple[TensorSpec, ...], actual: dict[str, tuple[str, list[int]]], problems: list[str]
) -> None:
    for spec in expected:
        if spec.name not in actual:
            names = ", ".join(sorted(actual)) or "none"
            problems.append(f"{kind} '{spec.name}' is missing (the model's {kind}s: {names})")
            continue
        datatype, shape = actual[spec.name]
        if datatype != spec.datatype:
            problems.append(f"{kind} '{spec.name}': datatype is {datatype}, expected {spec.datatype}")
        problem = _shape_problem(kind, spec.name, spec.dims, shape)
        if problem:
            problems.append(problem)


def check_model(contract: ModelContract, config: dict, metadata: dict | None = None) -> ModelCheck:
    """Compares a normalized config (and metadata, when given) with the contract."""
    check = ModelCheck(contract)
    problems: list[str] = []
    check.max_batch_size = int(config.get("max_batch_size", 0))
    batched = check.max_batch_size > 0
    if not batched:
        problems.append("max_batch_size is 0: the model has no batch dimension, the client sends batches")

    config_inputs = {
        t["name"]: (config_dtype_to_kserve(t["data_type"]), t["dims"]) for t in config.get("input", [])
    }
    config_outputs = {
        t["name"]: (config_dtype_to_kserve(t["data_type"]), t["dims"]) for t in config.get("output", [])
    }
    _compare_tensors("input", contract.inputs, config_inputs, problems)
    _compare_tensors("output", contract.outputs, config_outputs, problems)

    expected_inputs = {spec.name for spec in contract.inputs}
    for tensor in config.get("input", []):
        if tensor["name"] not in expected_inputs and not tensor.get("optional", False):
            problems.append(
                f"input '{tensor['name']}' is required by the model but this client does not send it"
            )

    if metadata is not None:
        # Metadata shapes carry the batch dimension (-1) in front when the model batches.
        def strip_batch(shape: list[int]) -> list[int]:
            return shape[1:] if batched and shape else shape

        meta_inputs = {
            t["name"]: (t["datatype"], strip_batch(t["shape"])) for t in metadata.get("inputs", [])
        }
        meta_outputs = {
            t["name"]: (t["datatype"], strip_batch(t["shape"])) for t in metadata.get("outputs", [])
        }
        _compare_tensors("input", contract.inputs, meta_inputs, problems)
        _compare_tensors("output", contract.outputs, meta_outputs, problems)

    for tensor in config.get("output", []):
        if tensor.get("label_filename"):
            check.labelled_outputs.add(tensor["name"])
    for spec in contract.outputs:
        if spec.labels and spec.name in config_outputs and spec.name not in check.labelled_outputs:
            check.warnings.append(
                f"output '{spec.name}' has no label_filename in the config: "
                "top-k shows class indices, not labels"
            )
    check.input_shapes = {name: tuple(dims) for name, (_, dims) in config_inputs.items()}
    check.problems = list(dict.fromkeys(problems))  # config and metadata often report the same difference
    return check
