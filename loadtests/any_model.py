"""A request kind for any model the server serves: `python -m loadtests --mix NAME=1`.

Besides the kinds written for our models (loadtests/workloads.py: mnist_pipeline, mnist, l2norm), any other
name in --mix is a model of the server. Its requests are built from what the server reports about it (names,
datatypes, per-item shapes, max_batch_size: trt_plugin_kit/tritonserver/model_io.py), read once by the first
request of each Locust process; the data come from a file (--model-data NAME=FILE: .npy for a one-input model,
.npz with one array per input name) or are generated uniformly in --model-range LOW:HIGH (dynamic dims
--model-dim long). A response counts as a failure unless every output came back with the declared datatype
and shape for the batch sent.

    python -m loadtests --mix scaled_poly=1 --users 4 --run-time 10s
    python -m loadtests --mix mnist=1,my_model=2 --model-data my_model=inputs.npz --model-batch 8
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

import numpy as np

from loadtests.outcomes import RequestFailure, ResponseCheckError, locust_name
from trt_plugin_kit.tritonserver.model_io import (
    ModelDataError,
    ModelIO,
    generate_inputs,
    output_problems,
    read_inputs,
    value_range,
)
from trt_plugin_kit.tritonserver.options import positive_int

# A model name as Triton's repository takes it (a folder name).
MODEL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
POOL_ITEMS = 256  # generated items per input: enough that requests differ


def extra_kinds(text: str, known: tuple[str, ...]) -> tuple[str, ...]:
    """The names of a --mix text that are not our request kinds: models of the server (checked as names)."""
    names = []
    for part in str(text).split(","):
        name = part.partition("=")[0].strip()
        if name and name not in known and name not in names:
            if not MODEL_NAME.match(name):
                raise ValueError(
                    f"{name!r} in --mix is neither a request kind ({', '.join(known)}) nor a model name"
                )
            names.append(name)
    return tuple(names)


def model_files(text: str) -> dict[str, str]:
    """--model-data "NAME=FILE,NAME=FILE" as {model: file}; "generated" (the default, shown so): none."""
    files = {}
    if str(text).strip() == "generated":
        return files
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        name, sep, path = part.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise ValueError(f"expected NAME=FILE, got {part!r}")
        files[name.strip()] = path.strip()
    return files


@dataclass(frozen=True)
class ModelDataOptions:
    """What the any-model kinds send: batch size, files per model, the range and dynamic length."""

    batch: int = 4
    files: dict[str, str] = field(default_factory=dict)
    low: float = -1.0
    high: float = 1.0
    dim: int = 16


def add_arguments(group, cli_options) -> None:
    """--model-batch, --model-data, --model-range, --model-dim (and their LOADTEST_MODEL_* variables)."""
    add = cli_options.add_env_argument
    add(
        group, "--model-batch", variable="LOADTEST_MODEL_BATCH", default=4, convert=positive_int, metavar="N",
        help="items per request to a model of the server named in --mix (at most its max_batch_size)",
    )  # fmt: skip
    add(
        group, "--model-data", variable="LOADTEST_MODEL_DATA", default={}, convert=model_files,
        shown="generated", metavar="NAME=FILE,...",
        help="inputs of such a model from a file: .npy (one input) or .npz (an array per input name), "
        "items along the first axis",
    )  # fmt: skip
    add(
        group, "--model-range", variable="LOADTEST_MODEL_RANGE", default=(-1.0, 1.0), convert=value_range,
        shown="-1:1", metavar="LOW:HIGH", help="where generated inputs lie (uniform; integers LOW..HIGH)",
    )  # fmt: skip
    add(
        group, "--model-dim", variable="LOADTEST_MODEL_DIM", default=16, convert=positive_int, metavar="N",
        help="length of the dynamic (-1) dims of generated inputs",
    )  # fmt: skip


def options_from_args(args) -> ModelDataOptions:
    low, high = args.model_range
    return ModelDataOptions(args.model_batch, dict(args.model_data), low, high, args.model_dim)


def locust_arguments(options: ModelDataOptions) -> list[str]:
    """The options as the flags add_arguments defines (for the Locust subprocess)."""
    # One argument with "=": a range starting with "-" would read as a flag.
    arguments = ["--model-batch", str(options.batch), f"--model-range={options.low:g}:{options.high:g}"]
    arguments += ["--model-dim", str(options.dim)]
    if options.files:
        arguments += ["--model-data", ",".join(f"{k}={v}" for k, v in options.files.items())]
    return arguments


def fetch_model_io(client, protocol: str, model: str) -> ModelIO:
    """What the server says about ``model`` (a tritonclient client of either protocol)."""
    extra = {"as_json": True} if protocol == "grpc" else {}
    return ModelIO.from_server(
        client.get_model_metadata(model, **extra), client.get_model_config(model, **extra)
    )


class ModelTask:
    """Requests of ``batch`` items to one model of the server; a Locust task (see workloads.TritonTask)."""

    def __init__(self, model: str, options: ModelDataOptions) -> None:
        self.model = model
        self.options = options
        self.batch = options.batch
        self.path = options.files.get(model)
        if self.path is not None and not self.path.endswith((".npy", ".npz")):
            raise ValueError(f"--model-data {model}={self.path}: give a .npy or .npz file")
        self.io: ModelIO | None = None
        self.pool: dict[str, np.ndarray] = {}
        self.output_names: tuple[str, ...] = ()
        self.__name__ = f"{model} b{self.batch}"

    def __repr__(self) -> str:
        return f"ModelTask(model={self.model!r}, batch={self.batch})"

    def prepare(self, io: ModelIO) -> None:
        """The payload pool for the model as the server describes it; ModelDataError if it does not fit."""
        if io.batching and self.batch > io.max_batch_size:
            raise ModelDataError(
                f"--model-batch {self.batch} is more than {io.name}'s max_batch_size {io.max_batch_size}"
            )
        if not io.batching and self.batch != 1:
            raise ModelDataError(f"{io.name} takes no batch dimension: use --model-batch 1")
        if self.path is not None:
            pool = read_inputs(io, self.path)
        else:
            items = POOL_ITEMS if io.batching else 1
            pool = generate_inputs(io, items, self.options.low, self.options.high, self.options.dim)
        self.io, self.pool = io, pool
        self.output_names = tuple(t.name for t in io.outputs)

    def __call__(self, user) -> None:
        if self.io is None:
            try:
                self.prepare(fetch_model_io(user.connection.client, user.protocol, self.model))
            except Exception as error:  # noqa: BLE001 - a failed request (reported), the user goes on
                user.environment.events.request.fire(
                    request_type=user.protocol,
                    name=locust_name(self.model, self.batch),
                    response_time=0.0,
                    response_length=0,
                    exception=RequestFailure.wrap(error),
                    context={"protocol": user.protocol, "model": self.model, "batch": self.batch},
                )
                return
        user.infer(self, self.make_inputs())

    def make_inputs(self) -> dict[str, np.ndarray]:
        if not self.io.batching:
            return dict(self.pool)
        items = len(next(iter(self.pool.values())))
        rows = np.arange(self.batch) % items if items < self.batch else None
        start = 0 if rows is not None else random.randrange(items - self.batch + 1)
        return {
            name: array[rows] if rows is not None else array[start : start + self.batch]
            for name, array in self.pool.items()
        }

    def check(self, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> None:

        problems = output_problems(self.io, self.batch if self.io.batching else 1, outputs)
        if problems:
            raise ResponseCheckError("; ".join(problems))
