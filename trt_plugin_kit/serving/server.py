"""Start, watch and stop NVIDIA Triton Inference Server on this project's model repository.

Two variants serve the same four models under the same names, inputs and outputs:

- ``tensorrt``: a host with an NVIDIA GPU, TensorRT and a ``tritonserver`` install (e.g. inside NVIDIA's
  tritonserver container). The plugin library is built if missing and handed to the TensorRT backend
  (:func:`tensorrt_plugins_flag`), which loads it before it deserialises the engines; engines are built if
  missing.
- ``cpu``: anywhere else. The ``tritonserver`` binary shipped in the ``nvidia-pytriton`` wheel runs the
  Python backend on the CPU configurations (``--model-config-name=cpu``: ``configs/cpu.pbtxt`` in a model
  folder replaces ``config.pbtxt``; models without one use their default configuration).

``trt-plugin-kit serve`` (``make serve``, :mod:`trt_plugin_kit.serving.cli`) is the command-line front
end; tests use :class:`TritonServer` directly (see tests/conftest.py).
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trt_plugin_kit.interface import (
    ADMIN_HEADER,
    ADMIN_KEY_ENV,
    CPU_MODEL_CONFIG_NAME,
    MODEL_NAMES,
    MODEL_REPOSITORY,
    PLUGIN_ONNX_BACKEND,
    PLUGINS_DIR,
    PLUGINS_DIR_ENV,
    REPO_ROOT,
    RESTRICTED_APIS,
    VARIANTS,
)
from trt_plugin_kit.serving import model_subset
from trt_plugin_kit.serving.edge import limits as edge_limits
from trt_plugin_kit.serving.edge.contract import (
    EXIT_MODEL_DOWN,
    EXIT_NEVER_READY,
    INTERNAL_KEY_ENV,
    socket_paths,
)
from trt_plugin_kit.serving.host import (
    Ports,
    PortTaken,
    ServingError,
    _client_host,
    check_ports_free,
    ensure_engines,
    ensure_plugin_library,
    ports_answered_by_others,
    probe_host,
    system_triton_python_path,
)
from trt_plugin_kit.serving.shm_budget import python_backend_shm_flags
from trt_plugin_kit.tritonserver.options import ServerLocation

# Largest request accepted (HTTP body after decompression, gRPC message): the edge's limit, also given to
# Triton as --http-max-input-size where it has it (>= 25.05). Bigger than mnist_preprocess's per-image limit
# so that those get the model's error.
HTTP_MAX_INPUT_BYTES = edge_limits.MAX_REQUEST_BYTES
# First Triton release whose HTTP JSON path checks declared shapes before allocating (server PR #8676,
# NGC 26.04). The edge stands in front of every release; this only tells which ones are exposed without it.
HTTP_JSON_FIXED_VERSION = (2, 68, 0)
# Triton's words for a model that did not load (model_lifecycle.cc), and where the edge lists those that did.
LOAD_FAILURE = re.compile(r"failed to load '([^']+)' version (\d+): (.*)$")
EDGE_MODELS_FILE = "edge-models.json"
# Triton's flags for TLS on its gRPC port; behind the edge they configure the edge's public port instead.
GRPC_TLS_FLAGS = ("--grpc-use-ssl", "--grpc-server-cert", "--grpc-server-key", "--grpc-root-cert")
# `--edge`: on (default), the edge holds the public ports and tritonserver listens on private Unix sockets;
# off, tritonserver on the public ports itself (for measuring the edge's cost; never for clients).
EDGE_MODES = ("on", "off")
# Lines a CPU start always logs at level E: Triton's GPU-enabled core probes CUDA and finds no driver
# (CudaBlockManager, and a CUDA stream for the ensemble). No flag turns the probes off; they are harmless.
EXPECTED_CPU_ERROR_LINES = (
    "CudaDriverHelper has not been initialized",
    "unable to create stream for mnist_pipeline: CUDA driver version is insufficient",
)
# The hardening every deployment of this kit starts tritonserver with (make serve, compose, Kubernetes):
# load exactly what the repository holds at start and never load/unload remotely, ready only when every
# model is, stop on a model that fails to load, complete configurations only, no SageMaker/Vertex AI
# endpoints. Deployment files take these from here (generated or checked by tests), never by copy.
HARDENED_FLAGS = (
    "--model-control-mode=none",
    "--strict-readiness=true",
    "--exit-on-error=true",
    "--disable-auto-complete-config",
    "--allow-metrics=true",
    "--allow-sagemaker=false",
    "--allow-vertex-ai=false",
)

# Latency percentiles (p50/p90/p95/p99 summaries per model), which deploy/monitoring/'s dashboard and rules
# read; tritonserver leaves them off unless asked.
METRICS_FLAGS = ("--metrics-config=summary_latencies=true",)


# How long a dead Python stub waits for its tritonserver to end too before the stub is reported as the cause.
STUB_GRACE_S = 2.0
# Stopping a server whose edge found a model not answering (a hung Python stub): that model never unloads, so
# tritonserver would take its whole exit timeout; the other models' requests get this long, then SIGKILL.
DOWN_DRAIN_S = 3.0


def restricted_api_flags(admin_key: str, help_text: str | None = None) -> list[str]:
    """The flags that put the administrative APIs behind ADMIN_HEADER: admin_key (where Triton has them)."""
    restriction = f"{','.join(RESTRICTED_APIS)}:{ADMIN_HEADER}={admin_key}"
    flags = {"--http-restricted-api": restriction, "--grpc-restricted-protocol": restriction}
    return [f"{flag}={value}" for flag, value in flags.items() if help_text is None or flag in help_text]


# Prefix of the Python backend's shared-memory regions in /dev/shm; a per-server suffix lets us remove
# exactly what one server left behind when it died.
SHM_PREFIX = "trt_plugin_kit_"
SHM_DIR = Path("/dev/shm")


# --------------------------------------------------------------------------------------------------------
# CPU variant: PyTriton's tritonserver binary and Python backend


@dataclass(frozen=True)
class PyTritonDistribution:
    root: Path  # .../site-packages/pytriton/tritonserver (bin/, backends/, caches/, python_backend_stubs/)
    libs: Path  # .../site-packages/nvidia_pytriton.libs (shared libraries the binary links)

    @property
    def tritonserver(self) -> Path:
        return self.root / "bin" / "tritonserver"

    def stub_for(self, python_version: str) -> Path:
        return self.root / "python_backend_stubs" / python_version / "triton_python_backend_stub"


def find_pytriton_distribution() -> PyTritonDistribution:
    # Found, not imported: importing pytriton costs 0.6 CPU-s (its client, aiohttp), once per server start.
    spec = importlib.util.find_spec("pytriton")
    if spec is None or spec.origin is None:
        raise ServingError(
            "the CPU variant needs the tritonserver binary from the `nvidia-pytriton` wheel; "
            "install it with `pip install -e '.[serve]'` (make serve does this)"
        )
    package_dir = Path(spec.origin).resolve().parent
    distribution = PyTritonDistribution(
        package_dir / "tritonserver", package_dir.parent / "nvidia_pytriton.libs"
    )
    if not distribution.tritonserver.is_file():
        raise ServingError(
            f"nvidia-pytriton is installed but has no server binary at {distribution.tritonserver}"
        )
    return distribution


def python_shared_library_dir() -> Path:
    """Directory of this interpreter's libpython, which the Python backend stub links against.

    A Python built with --enable-shared has it in LIBDIR. Debian's and Ubuntu's python3 executable is linked
    statically, but the distribution ships the same interpreter as a shared library (package libpython3.X)
    in that same LIBDIR, /usr/lib/<multiarch>, under its soname (the unversioned name comes only with -dev).
    """
    library_dir, multiarch = (sysconfig.get_config_var(var) for var in ("LIBDIR", "MULTIARCH"))
    candidates = [library_dir, library_dir and multiarch and f"{library_dir}/{multiarch}"]
    directories = list(dict.fromkeys(filter(None, candidates)))
    version = f"{sys.version_info.major}.{sys.version_info.minor}{sys.abiflags}"
    names = [sysconfig.get_config_var(var) or "" for var in ("INSTSONAME", "LDLIBRARY")]
    names += [f"libpython{version}.so.1.0", f"libpython{version}.so"]
    for directory in directories:
        for name in dict.fromkeys(name for name in names if ".so" in name):
            if (Path(directory) / name).is_file():
                return Path(directory)
    raise ServingError(
        f"Python {sys.version.split()[0]} at {sys.executable} has no shared libpython (looked for "
        f"libpython{version}.so* in {', '.join(directories) or 'no LIBDIR'}); Triton's Python "
        "backend stub needs one. Debian/Ubuntu: `apt-get install libpython"
        f"{sys.version_info.major}.{sys.version_info.minor}`; otherwise use a Python built with "
        "--enable-shared (pyenv: PYTHON_CONFIGURE_OPTS=--enable-shared) for the virtual environment."
    )


def prepare_cpu_backends(distribution: PyTritonDistribution, workdir: Path) -> Path:
    """Lay out a backend directory whose Python backend stub matches this interpreter's version.

    The wheel ships one stub per Python version; Triton expects it next to libtriton_python.so.
    """
    python_version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = distribution.stub_for(python_version)
    if not stub.is_file():
        raise ServingError(f"nvidia-pytriton has no Python backend stub for Python {python_version} ({stub})")
    backend_dir = workdir / "backends" / "python"
    backend_dir.mkdir(parents=True)
    source_dir = distribution.root / "backends" / "python"
    (backend_dir / "triton_python_backend_utils.py").symlink_to(source_dir / "triton_python_backend_utils.py")
    # A copy, not a link: for a Python-based backend (plugin_onnx below) Triton refuses a library whose real
    # path "escapes backend directory" (1.4 MB).
    shutil.copy2(source_dir / "libtriton_python.so", backend_dir / "libtriton_python.so")
    shutil.copy2(stub, backend_dir / "triton_python_backend_stub")
    # The CPU stand-in of plugin-flavour ONNX models, a Python-based backend: Triton runs its model.py with
    # the Python backend's library and stub (found in backends/python) for every model naming it.
    stand_in = workdir / "backends" / PLUGIN_ONNX_BACKEND
    stand_in.mkdir()
    (stand_in / "model.py").symlink_to(Path(__file__).with_name("plugin_onnx_model.py"))
    return workdir / "backends"


def cpu_environment(distribution: PyTritonDistribution, base: dict[str, str]) -> dict[str, str]:
    """Environment in which the Python backend stub runs this virtual environment's Python and packages."""
    env = dict(base)
    library_path = [str(distribution.libs), str(python_shared_library_dir())]
    if env.get("LD_LIBRARY_PATH"):
        library_path.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(library_path)
    # The stub embeds libpython: point it at this interpreter's standard library and at the virtual
    # environment's packages (numpy, Pillow, onnxruntime) plus the repository (trt_plugin_kit).
    env["PYTHONHOME"] = sys.base_prefix
    python_path = [str(REPO_ROOT), *sysconfig.get_paths()["purelib"].split(os.pathsep)]
    platlib = sysconfig.get_paths()["platlib"]
    if platlib not in python_path:
        python_path.append(platlib)
    env["PYTHONPATH"] = os.pathsep.join(python_path)
    env["PYTHONNOUSERSITE"] = "1"
    env[PLUGINS_DIR_ENV] = str(PLUGINS_DIR)  # plugin_onnx: this checkout's specs and references
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


# --------------------------------------------------------------------------------------------------------
# The server process


def supported_options(tritonserver: Path, env: dict[str, str]) -> str:
    """`tritonserver --help` text, to pass hardening flags only to servers that know them."""
    result = subprocess.run(
        [str(tritonserver), "--help"], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    return result.stdout + result.stderr


def check_model_repository(model_repository: Path) -> None:
    """Fail early, with the missing paths, instead of letting Triton start without a model."""
    missing = [str(model_repository / name) for name in MODEL_NAMES if not (model_repository / name).is_dir()]
    if missing:
        raise ServingError("model folders missing from the repository: " + ", ".join(missing))


def tensorrt_plugins_flag(plugin_library: Path) -> str:
    """tritonserver's flag that has its TensorRT backend, and no other process, load the plugin library.

    Triton's tensorrt_backend (src/tensorrt.cc, TRITONBACKEND_Initialize) dlopen()s every path of its
    ``plugins`` setting (';'-separated, RTLD_NOW | RTLD_LOCAL) before any TensorRT model loads; the
    library's static registrations then register its creators with the registry of the libnvinfer the
    backend runs (the library links it). Unlike LD_PRELOAD, which every child inherits, the Python backend's
    stubs (mnist_preprocess) never load it, nor libnvinfer. The backend only logs a library it cannot load
    ("unable to load shared library"): the engines then fail to load, naming the missing plugin."""
    if ";" in str(plugin_library):  # the backend splits its setting at ';' (a ',' after the '=' is kept)
        raise ServingError(f"plugin library path {plugin_library} contains ';', the backend's separator")
    return f"--backend-config=tensorrt,plugins={plugin_library}"


class TritonServer:
    """One tritonserver process on this repository's models; a context manager.

    >>> with TritonServer(variant="cpu", ports=Ports.free(), log_file=Path("triton.log")) as server:
    ...     print(server.http_url)  # "127.0.0.1:PORT", the form tritonclient expects
    """

    def __init__(
        self,
        variant: str = "cpu",
        ports: Ports | None = None,
        host: str = "127.0.0.1",
        model_repository: Path = MODEL_REPOSITORY,
        log_file: Path | None = None,
        log_verbose: int = 0,
        plugin_library: Path | None = None,
        admin_key: str | None = None,
        exit_timeout_s: int = 15,
        extra_args: Sequence[str] = (),
        edge: str = "on",
        models: Sequence[str] = (),
    ):
        if variant not in VARIANTS:
            raise ServingError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
        self.variant = variant
        self.ports = ports or Ports()
        self.host = host
        self.model_repository = Path(model_repository).resolve()
        # Some of its models only (serving/model_subset.py); empty: all of them.
        self.models = tuple(models)
        self._served_repository = self.model_repository
        self.log_file = log_file
        self.log_verbose = log_verbose
        self.plugin_library = plugin_library
        # The operator's key ($TRITON_ADMIN_KEY): what a client must send for the restricted APIs. None: they
        # are closed to everybody. tritonserver itself gets a random key per start that is never printed
        # (with the edge on, only the edge sends it; the operator's key reaches no command line).
        self.admin_key = admin_key or os.environ.get(ADMIN_KEY_ENV) or None
        self._internal_key = secrets.token_urlsafe(32)
        if edge not in EDGE_MODES:
            raise ServingError(f"edge must be one of {', '.join(EDGE_MODES)}, not {edge!r}")
        self.edge = edge
        self.edge_process: subprocess.Popen | None = None
        self.socket_dir: Path | None = None
        self.isolation = ""  # how tritonserver is kept from every process but the edge (for the banner)
        self._stub_pids: dict[int, str] = {}
        self._grpc_tls_args: list[str] = []
        self._console_lines: collections.deque[str] = collections.deque(maxlen=400)
        self.shm_prefix = f"{SHM_PREFIX}{os.getpid()}_{secrets.token_hex(4)}_"
        # How long Triton waits at shutdown for in-flight requests and open client connections.
        self.exit_timeout_s = exit_timeout_s
        self.extra_args = list(extra_args)
        self.process: subprocess.Popen | None = None
        self.command: list[str] = []
        self._workdir: Path | None = None
        self._log_handle = None

    # Endpoints in the forms clients use: tritonclient takes "host:port", Prometheus a URL.
    @property
    def http_url(self) -> str:
        return f"{_client_host(self.host)}:{self.ports.http}"

    @property
    def grpc_url(self) -> str:
        return f"{_client_host(self.host)}:{self.ports.grpc}"

    @property
    def metrics_url(self) -> str:
        return f"http://{_client_host(self.host)}:{self.ports.metrics}/metrics"

    @property
    def location(self) -> ServerLocation:
        """The same endpoints as the kit's tools take them (both protocols and metrics)."""
        return ServerLocation(_client_host(self.host), self.ports.http, self.ports.grpc, self.ports.metrics)

    def describe_variant(self) -> str:
        if self.variant == "cpu":
            return (
                f"cpu (PyTriton's tritonserver, Python backend, --model-config-name={CPU_MODEL_CONFIG_NAME}: "
                "ONNX Runtime and NumPy)"
            )
        return f"tensorrt (TensorRT engines, plugins from {self.plugin_library} in the TensorRT backend)"

    # -- lifecycle ------------------------------------------------------------------------------------

    def __enter__(self) -> TritonServer:
        self.start()
        try:
            self.wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self) -> None:
        if self.process is not None:
            raise ServingError("this server was already started")
        check_model_repository(self.model_repository)
        check_ports_free(self.host, self.ports)
        self._workdir = Path(tempfile.mkdtemp(prefix="trt_plugin_kit_triton_"))
        try:
            if self.models:
                self._served_repository = model_subset.link_subset(
                    self.model_repository,
                    self.models,
                    self._workdir / "models",
                    model_subset.config_name_of(self.variant),
                )
            binary, env, variant_args = self._prepare_variant()
            prefix = []
            if self.guarded:
                self.socket_dir = self._workdir / "sockets"
                self.socket_dir.mkdir(mode=0o700)
                prefix, self.isolation = network_isolation()
            self.command = [str(binary), *self._common_args(supported_options(binary, env)), *variant_args]
            # TLS for the public gRPC port is the edge's to do: Triton's private socket stays plain.
            tls = [a for a in self.extra_args if a.startswith(GRPC_TLS_FLAGS)] if self.guarded else []
            self._grpc_tls_args = tls
            self.command = prefix + self.command + [a for a in self.extra_args if a not in tls]
            if self.log_file is not None:
                self.log_file.parent.mkdir(parents=True, exist_ok=True)
                self._log_handle = open(self.log_file, "ab")  # noqa: SIM115 - closed in stop()
            self.process = self._spawn(self.command, env)
            if self.guarded:
                self._start_edge()
        except BaseException:
            self.stop()
            raise

    @property
    def guarded(self) -> bool:
        """Whether the public ports are the edge's (serving/edge) and tritonserver's are private."""
        return self.edge == "on"

    def _start_edge(self) -> None:
        command = [
            sys.executable,
            "-m",
            "trt_plugin_kit.serving.edge",
            *self._grpc_tls_args,
            f"--http={self.host}:{self.ports.http}",
            f"--grpc={self.host}:{self.ports.grpc}",
            f"--metrics={self.host}:{self.ports.metrics}",
            f"--socket-dir={self.socket_dir}",
            f"--status-file={self._workdir / 'edge-status.txt'}",
            f"--models-file={self._workdir / EDGE_MODELS_FILE}",
        ]
        # Keys by environment (readable by this user only), never on a command line.
        env = {k: v for k, v in os.environ.items() if k != ADMIN_KEY_ENV}
        env[INTERNAL_KEY_ENV] = self._internal_key
        if self.admin_key:
            env[ADMIN_KEY_ENV] = self.admin_key
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
        self.edge_process = self._spawn(command, env)

    def _spawn(self, command: list[str], env: dict[str, str]) -> subprocess.Popen:
        # Own session: a Ctrl-C in the terminal reaches only the launcher, which then shuts the server
        # (and its Python backend stubs, same process group) down in order. umask 077: files the server
        # creates (logs, traces) are the owner's only. Without a log file the output goes to the console
        # through a pipe that keeps its last lines, so that a failed start can show its cause again.
        process = subprocess.Popen(
            command,
            env=env,
            cwd=self._workdir,
            stdin=subprocess.DEVNULL,
            stdout=self._log_handle if self._log_handle else subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            umask=0o077,
        )
        if self._log_handle is None:
            threading.Thread(target=self._echo, args=(process.stdout,), daemon=True).start()
        return process

    def _echo(self, stream) -> None:
        for line in iter(stream.readline, b""):
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
            self._console_lines.append(line.decode(errors="replace").rstrip("\n"))

    def _log_lines(self) -> list[str]:
        if self.log_file is not None and self.log_file.is_file():
            return self.log_file.read_text(errors="replace").splitlines()
        return list(self._console_lines)

    def model_load_failures(self) -> list[str]:
        """ "model 'NAME' failed to load: REASON", from Triton's log (a start that --exit-on-error ended)."""
        failures = []
        for line in self._log_lines():
            match = LOAD_FAILURE.search(line)
            if match:
                failures.append(f"model '{match[1]}' failed to load: {match[3].rstrip(chr(34))}")
        return list(dict.fromkeys(failures))

    def killed_by_signal(self) -> bool:
        """tritonserver ended by a signal (an abort, a segfault): a crash, not a configuration it refused.
        Read it before stop(), which forgets the process."""
        process = self.process
        return process is not None and process.poll() is not None and process.returncode < 0

    def loaded_models(self) -> list[str]:
        """The models tritonserver serves (once ready), as the edge read them from its repository index."""
        try:
            return json.loads((self._workdir / EDGE_MODELS_FILE).read_text())
        except (OSError, TypeError, ValueError):
            return []

    def _prepare_variant(self) -> tuple[Path, dict[str, str], list[str]]:
        # The operator's key is the edge's alone (its environment); tritonserver and its stubs never see it.
        env = {key: value for key, value in os.environ.items() if key != ADMIN_KEY_ENV}
        if self.variant == "cpu":
            distribution = find_pytriton_distribution()
            backends = prepare_cpu_backends(distribution, self._workdir)
            env = cpu_environment(distribution, env)
            args = [
                f"--backend-directory={backends}",
                f"--cache-directory={distribution.root / 'caches'}",
                f"--model-config-name={CPU_MODEL_CONFIG_NAME}",
                "--allow-gpu-metrics=false",
                # No GPU here: skip the pinned host memory pool that needs a CUDA driver.
                "--pinned-memory-pool-byte-size=0",
                "--cuda-memory-pool-byte-size=0:0",
            ]
            return distribution.tritonserver, env, args

        probe = probe_host()
        if not probe.tensorrt_ready:
            raise ServingError("the TensorRT variant cannot run here: " + "; ".join(probe.missing))
        self.plugin_library = ensure_plugin_library(probe.tensorrt_version, self.plugin_library)
        ensure_engines(self.model_repository, self.plugin_library)
        env["PYTHONPATH"] = os.pathsep.join(system_triton_python_path(env.get("PYTHONPATH")))
        return probe.tritonserver, env, [tensorrt_plugins_flag(self.plugin_library)]

    def _common_args(self, help_text: str) -> list[str]:
        if self.guarded:
            # Unix sockets in a 0700 folder: no TCP port at all; the edge is the one client.
            paths = socket_paths(self.socket_dir)
            endpoints = [
                f"--http-address={paths['http_flag']}",
                "--http-port=0",
                f"--grpc-address={paths['grpc_flag']}",
                "--grpc-port=0",
                f"--metrics-address={paths['metrics_flag']}",
                "--metrics-port=0",
            ]
        else:
            endpoints = [
                f"--http-address={self.host}",
                f"--http-port={self.ports.http}",
                f"--grpc-address={self.host}",
                f"--grpc-port={self.ports.grpc}",
                f"--metrics-address={self.host}",
                f"--metrics-port={self.ports.metrics}",
            ]
        args = [
            f"--model-repository={self._served_repository}",
            *HARDENED_FLAGS,
            *METRICS_FLAGS,
            *endpoints,
            f"--exit-timeout-secs={self.exit_timeout_s}",
            f"--log-verbose={self.log_verbose}",
            f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}",
            *python_backend_shm_flags(),
        ]
        # Behind the edge only the edge knows tritonserver's key; without it, the operator's key (if any) or
        # the random one, which nobody knows.
        triton_key = self._internal_key if self.guarded else (self.admin_key or self._internal_key)
        args += restricted_api_flags(triton_key, help_text)
        if "--http-max-input-size" in help_text:
            args.append(f"--http-max-input-size={HTTP_MAX_INPUT_BYTES}")
        if "--grpc-infer-allocation-pool-size" in help_text:
            # Triton keeps up to 8 (its default) gRPC inference states for reuse, each with the largest
            # request it held (protobuf's Clear keeps the bytes): near-32 MiB requests left 192-250 MB in
            # tritonserver for good. None kept: each call allocates its own, freed when it ends.
            args.append("--grpc-infer-allocation-pool-size=0")
        if (
            "--allow-client-shm" in help_text
        ):  # Triton >= 2.69 (NGC 26.05) refuses clients' regions without it
            args.append("--allow-client-shm=true")
        return args

    def is_running(self) -> bool:
        return self.exit_reason() is None and self.process is not None

    def exit_reason(self) -> str | None:
        """None while everything runs; else which process ended and how (signal names spelt out), or which
        model's Python backend stub died (tritonserver keeps running without it, the model unanswered)."""
        if self.process is not None and self.process.poll() is not None:
            return f"tritonserver {describe_returncode(self.process.returncode)}"
        if self.edge_process is not None and self.edge_process.poll() is not None:
            code = self.edge_process.returncode
            try:
                why = (self._workdir / "edge-status.txt").read_text().strip()
            except (OSError, TypeError):
                known = {
                    EXIT_MODEL_DOWN: "a model stopped answering",
                    EXIT_NEVER_READY: "tritonserver never ready",
                }
                why = known.get(code, "")
            return f"the edge {describe_returncode(code)}" + (f" ({why})" if why else "")
        if self._stub_pids and self.process is not None:
            alive = python_backend_stubs(self.process.pid)
            for pid, instance in self._stub_pids.items():
                if pid not in alive:
                    # A dying tritonserver (an abort writes its backtrace first) loses its stubs too: the
                    # server's own end, when it comes within STUB_GRACE_S, is the cause to report.
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self.process.wait(timeout=STUB_GRACE_S)
                        return f"tritonserver {describe_returncode(self.process.returncode)}"
                    return f"the Python backend stub of model instance {instance!r} died"
        return None

    def wait_for_exit(self, poll_s: float = 0.5) -> str:
        """Block until tritonserver or the edge ends, or a Python stub dies; returns :meth:`exit_reason`."""
        while True:
            reason = self.exit_reason()
            if reason is not None:
                return reason
            time.sleep(poll_s)

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self._log_lines()[-lines:]) or "(no output)"

    def wait_until_ready(self, timeout_s: float = 180.0) -> None:
        """Wait until both protocols answer ready (strict readiness: every model loaded) with the kit's one
        readiness wait (trt_plugin_kit.tritonserver.protocol); stops early, with the log, if a process
        exits."""
        if self.process is None:
            raise ServingError("the server was not started")
        # Imported here: triton_protocol needs numpy and tritonclient, which the system Python that serves
        # the TensorRT variant in NVIDIA's container may lack until the server is being started from a venv.
        from trt_plugin_kit.tritonserver.protocol import NotReady, wait_until_ready  # noqa: PLC0415

        location = self.location
        # A gRPC endpoint with TLS (extra --grpc-use-ssl flags) is its owner's to check; HTTP says ready too.
        tls = any(arg.startswith("--grpc-use-ssl") for arg in self.extra_args)
        protocols = ("http",) if tls else ("http", "grpc")
        try:
            wait_until_ready(
                location, protocols=protocols, timeout_s=timeout_s, poll_s=0.25, stopped=self.exit_reason
            )
        except NotReady as not_ready:
            what = (
                "tritonserver was not ready" if not_ready.waited_out else f"{not_ready} before it was ready"
            )
            failures = self.model_load_failures()
            cause = ("\n" + "\n".join(failures)) if failures else ""
            raise ServingError(f"{what}. Last lines of its log:\n{self.log_tail()}{cause}") from None
        # Ready, but from whom? A server on the port between our check and our bind answers the wait too.
        listener = self.edge_process if self.guarded else self.process
        others = ports_answered_by_others(self.ports, listener.pid)
        if others:
            raise PortTaken(
                f"address already in use: another process answered on {', '.join(others)}, not this server; "
                "stop it or choose other ports (--http-port/--grpc-port/--metrics-port)"
            )
        # The Python backend creates its regions while models load, mode 0644 whatever the umask
        # (Boost.Interprocess sets it): make tensors in transit the owner's only.
        restrict_shared_memory(self.shm_prefix)
        # From now on a stub that dies is a model that no longer answers (Triton 2.51 does not restart it and
        # keeps reporting the model ready): exit_reason() watches them.
        self._stub_pids = python_backend_stubs(self.process.pid)

    def stop(self) -> None:
        """SIGTERM (Triton drains in-flight requests), then SIGKILL the process group if it hangs.

        Also removes the Python backend's shared-memory regions of this server, which a server that died
        (or whose stubs were killed) leaves in /dev/shm.
        """
        self._stub_pids = {}
        edge, self.edge_process = self.edge_process, None
        if edge is not None:
            _terminate(edge, timeout_s=5)
        process, self.process = self.process, None
        if process is not None:
            # A model the edge found not answering does not unload either: tritonserver would wait its whole
            # exit timeout (15 s in make serve) before it ends. The other models' requests get DOWN_DRAIN_S.
            model_down = edge is not None and edge.returncode == EXIT_MODEL_DOWN
            drain_s = DOWN_DRAIN_S if model_down else self.exit_timeout_s + 15
            _terminate(process, timeout_s=drain_s)
            # Python backend stubs left behind by a crashed server share its process group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        remove_shared_memory(self.shm_prefix)
        if self._log_handle is not None:
            self._log_handle.close()
            self._log_handle = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        self.socket_dir = None


def _terminate(process: subprocess.Popen, timeout_s: float) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def describe_returncode(returncode: int) -> str:
    """'exited with code 1' or 'was killed by signal 6 (SIGABRT)', from a Popen returncode."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"was killed by signal {-returncode} ({name})"
    return f"exited with code {returncode}"


def remove_shared_memory(prefix: str, shm_dir: Path = SHM_DIR) -> list[str]:
    """Delete the shared-memory regions whose names start with ``prefix``; returns their names."""
    removed = []
    for region in shm_dir.glob(prefix + "*"):
        with contextlib.suppress(FileNotFoundError, PermissionError):
            region.unlink()
            removed.append(region.name)
    return removed


def restrict_shared_memory(prefix: str, shm_dir: Path = SHM_DIR) -> None:
    """chmod 0600 the shared-memory regions whose names start with ``prefix``."""
    for region in shm_dir.glob(prefix + "*"):
        with contextlib.suppress(FileNotFoundError, PermissionError):
            region.chmod(0o600)


def triton_version(tritonserver: Path) -> tuple[int, ...] | None:
    """Triton's release as a tuple, from the TRITON_VERSION file NVIDIA's images keep beside bin/, or None."""
    version_file = Path(tritonserver).resolve().parent.parent / "TRITON_VERSION"
    try:
        text = version_file.read_text().strip()
        return tuple(int(part) for part in text.split(".")[:3])
    except (OSError, ValueError):
        return None


def python_backend_stubs(triton_pid: int) -> dict[int, str]:
    """{pid: model instance} of the Python backend stubs tritonserver ``triton_pid`` runs (from /proc)."""
    stubs = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            state, parent = stat.rsplit(")", 1)[1].split()[:2]
            # A zombie (killed, not yet reaped by tritonserver) is a dead stub.
            if int(parent) != triton_pid or state == "Z" or "triton_python" not in stat.split(")", 1)[0]:
                continue
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        # triton_python_backend_stub <model path> <shm region> <shm size> <growth> <parent pid> <library dir>
        # <ipc handle> <instance name> <runtime>: the instance ("l2norm_0_0") is the 8th argument. (Looking
        # for "_0" instead once picked the shm region's name, whose random hex part can hold it.)
        instance = arguments[8].decode(errors="replace") if len(arguments) > 8 else "?"
        stubs[int(entry.name)] = instance
    return stubs


def network_isolation() -> tuple[list[str], str]:
    """A command prefix that runs tritonserver in a network namespace of its own, and what it achieves.

    tritonserver listens on Unix sockets only; inside its own network namespace it cannot open or accept a
    TCP connection either. Root can create one directly; others through a user namespace where the kernel
    allows it. Docker's default seccomp profile forbids both: the container's own network namespace then
    plays the part (nothing outside the container reaches its loopback).
    """
    unshare = shutil.which("unshare")
    if unshare is None:
        return [], "Unix sockets in a 0700 folder (no unshare command for a network namespace)"
    candidates = ([[unshare, "--net"]] if os.geteuid() == 0 else []) + [
        [unshare, "--user", "--map-current-user", "--net"]
    ]
    for prefix in candidates:
        result = subprocess.run([*prefix, "true"], capture_output=True, text=True, timeout=10, check=False)
        if result.returncode == 0:
            return prefix, "Unix sockets in a 0700 folder, inside a network namespace of its own"
        reason = result.stderr.strip().splitlines()[-1:] or ["refused"]
    return [], f"Unix sockets in a 0700 folder (no network namespace here: {reason[0]})"
