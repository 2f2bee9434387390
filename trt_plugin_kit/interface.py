"""The kit's public interface in one place: names, ports, headers, paths.

Everything that more than one tool (serving, clients, load tests, engine builder, compose, Kubernetes)
must agree on lives here and nowhere else; the other modules import it. Model and tensor names are part of
the interface users rely on: renaming one here renames it everywhere, which is the point.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path

# ---------------------------------------------------------------------------------------------------------
# Paths inside a checkout
#
# The checkout is located in one place, checkout(), and only when a path below is first used (this module's
# __getattr__), never when it is imported: the serving image puts the package on PYTHONPATH without a
# checkout around it, and what runs there (the edge, the Python backend's stubs) needs none of these paths.

# One folder per plugin (sources, spec.yaml, reference.py, README.md); see trt_plugin_kit/specs/spec.py.
# The serving process names its own in PLUGINS_DIR_ENV for the Python backend's stubs: a stub's Python ignores
# PYTHONPATH and imports the kit from the virtual environment's install, which may be another checkout's (a
# copy sharing the venv, as the scaffold test's), whose plugins/ lacks the copy's new plugins.
PLUGINS_DIR_ENV = "TRT_PLUGIN_KIT_PLUGINS_DIR"
# The 8,000 MNIST dev digits (IDX files, trt_plugin_kit/models/mnist.py) live beside the checkout (not in
# git), in SHARED_DIR/data/mnist; $MNIST_DIR or --mnist-dir point elsewhere.
MNIST_DIR_ENV = "MNIST_DIR"


@functools.cache
def checkout() -> Path:
    """The repository this package belongs to: the folder holding it (an editable install, as `make venv`
    makes, or a source tree on PYTHONPATH)."""
    return Path(__file__).resolve().parents[1]


_CHECKOUT_PATHS: dict[str, Callable[[Path], Path]] = {
    "REPO_ROOT": lambda root: root,
    "MODEL_REPOSITORY": lambda root: root / "model_repository",
    "PLUGINS_DIR": lambda root: Path(os.environ.get(PLUGINS_DIR_ENV) or root / "plugins"),
    "BUILD_DIR": lambda root: root / "build",
    "MODELS_DIR": lambda root: root / "models",
    "ONNX_DIR": lambda root: root / "models" / "onnx",
    "SAMPLES_DIR": lambda root: root / "samples" / "digits",
    # Data that lives beside the checkout (not in git): the MNIST digits for evaluation and load tests.
    "SHARED_DIR": lambda root: root.parent / "shared",
    "MNIST_DIR": lambda root: root.parent / "shared" / "data" / "mnist",
}


def __getattr__(name: str) -> Path:
    """A checkout path (REPO_ROOT, MODEL_REPOSITORY, PLUGINS_DIR, ...), computed on first use and kept."""
    if name not in _CHECKOUT_PATHS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = _CHECKOUT_PATHS[name](checkout())
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_CHECKOUT_PATHS])


# ---------------------------------------------------------------------------------------------------------
# The plugin library

PLUGIN_LIBRARY_NAME = "libtrt_plugin_kit.so"
# Every plugin of the library registers under this TensorRT plugin namespace and version. ONNX nodes
# (attributes `plugin_namespace`, `plugin_version`), build scripts and docs use these exact strings.
PLUGIN_NAMESPACE = "trt_plugin_kit"
PLUGIN_VERSION = "1"
# ONNX domain of the plugin nodes (their op_type is the creator name; see trt_plugin_kit/specs/nodes.py).
PLUGIN_DOMAIN = "trt_plugin_kit"

# ---------------------------------------------------------------------------------------------------------
# Models served by Triton (one folder each under model_repository/)

MNIST = "mnist"
L2NORM = "l2norm"
MNIST_PREPROCESS = "mnist_preprocess"
MNIST_PIPELINE = "mnist_pipeline"
MODEL_NAMES = (MNIST, L2NORM, MNIST_PREPROCESS, MNIST_PIPELINE)
# The second model family (issue 43): a small ViT with mnist's input and output, served like a model of one's
# own (model.onnx, the plugin_onnx stand-in on the CPU): not among MODEL_NAMES, which every repository holds.
MNIST_VIT = "mnist_vit"
# Models with a TensorRT engine (1/model.plan, built by build_engines.py) as their default configuration.
TENSORRT_MODELS = (MNIST, L2NORM)
# ONNX flavours of the TensorRT models: custom plugin nodes, or standard operators only.
FLAVOURS = ("plugin", "native")
PRECISIONS = ("fp32", "fp16", "int8")

# Tensor names (interface: clients and ensembles address tensors by these).
MNIST_INPUT, MNIST_OUTPUT = "image", "probabilities"
L2NORM_INPUT, L2NORM_OUTPUT = "vector", "normalized"
PIPELINE_INPUT, PIPELINE_OUTPUT = "image_bytes", "probabilities"

# Serving variants: the TensorRT engines with the plugin library, or the same interface on the CPU.
VARIANTS = ("tensorrt", "cpu")
# The CPU stand-in of a plugin-flavour ONNX model (configs/cpu.pbtxt: backend "plugin_onnx"): one
# Python-based backend for every model, serving the ONNX file the engine builder consumes
# (serving/plugin_onnx_model.py), by default model_repository/<name>/model.onnx.
PLUGIN_ONNX_BACKEND = "plugin_onnx"
MODEL_ONNX_FILE = "model.onnx"
VARIANT_ENV = "TRITON_VARIANT"  # the variant `make serve` and the tools that start a server pick
CPU_MODEL_CONFIG_NAME = "cpu"


def repository_models(model_repository: Path | None = None) -> list[str]:
    """The models a server of ``model_repository`` serves: ours and those added (new-plugin's), sorted."""
    folder = Path(model_repository or __getattr__("MODEL_REPOSITORY"))
    if not folder.is_dir():
        return []
    return sorted(
        p.name
        for p in folder.iterdir()
        if (p / "config.pbtxt").is_file() or (p / "configs" / f"{CPU_MODEL_CONFIG_NAME}.pbtxt").is_file()
    )


# ---------------------------------------------------------------------------------------------------------
# Endpoints

PROTOCOLS = ("grpc", "http")
DEFAULT_HOST = "127.0.0.1"  # not "localhost": an IPv6-first resolver must not add a delay
DEFAULT_HTTP_PORT, DEFAULT_GRPC_PORT, DEFAULT_METRICS_PORT = 8000, 8001, 8002
# Where the server is, for every tool (serve.py, clients, load tests, soak); a flag wins over its variable.
HOST_ENV = "TRITON_HOST"
HTTP_PORT_ENV, GRPC_PORT_ENV, METRICS_PORT_ENV = "TRITON_HTTP_PORT", "TRITON_GRPC_PORT", "TRITON_METRICS_PORT"
PROTOCOL_ENV = "TRITON_PROTOCOL"
# `--url` schemes: the protocol each implies and whether it asks for TLS.
URL_SCHEMES = {
    "http": ("http", False),
    "https": ("http", True),
    "grpc": ("grpc", False),
    "grpcs": ("grpc", True),
}

# Administrative APIs stay closed unless a request carries ADMIN_HEADER: <key>, the key coming from
# $TRITON_ADMIN_KEY where the server starts: loading/unloading/indexing models, registering shared memory,
# changing trace or log settings.
RESTRICTED_APIS = ("model-repository", "shared-memory", "trace", "logging")
ADMIN_HEADER = "triton-admin-key"
ADMIN_KEY_ENV = "TRITON_ADMIN_KEY"
# Triton's gRPC frontend expects restricted-protocol metadata under this prefix.
GRPC_RESTRICTED_HEADER_PREFIX = "triton-grpc-protocol-"
GRPC_ADMIN_HEADER = GRPC_RESTRICTED_HEADER_PREFIX + ADMIN_HEADER


def admin_header(protocol: str) -> str:
    """The header name that carries the admin key over ``protocol`` ("grpc" or "http")."""
    return GRPC_ADMIN_HEADER if protocol == "grpc" else ADMIN_HEADER
