"""Start, watch and stop NVIDIA Triton Inference Server on this project's model repository.

Two variants serve the same four models under the same names, inputs and outputs:

- ``tensorrt``: a host with an NVIDIA GPU, TensorRT and a ``tritonserver`` install (e.g. inside NVIDIA's
  tritonserver container). The plugin library is built if missing and put in ``LD_PRELOAD`` so that
  TensorRT finds the plugins when Triton deserialises the engines; engines are built if missing.
- ``cpu``: anywhere else. The ``tritonserver`` binary shipped in the ``nvidia-pytriton`` wheel runs the
  Python backend on the CPU configurations (``--model-config-name=cpu``: ``configs/cpu.pbtxt`` in a model
  folder replaces ``config.pbtxt``; models without one use their default configuration).

``scripts/serve.py`` (``make serve``) is the command-line front end; tests use :class:`TritonServer`
directly (see tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trt_plugin_kit.interface import (  # noqa: F401 - re-exported for the serving front ends
    ADMIN_HEADER,
    BUILD_DIR,
    CPU_MODEL_CONFIG_NAME,
    DEFAULT_GRPC_PORT,
    DEFAULT_HTTP_PORT,
    DEFAULT_METRICS_PORT,
    GRPC_ADMIN_HEADER,
    MODEL_NAMES,
    MODEL_REPOSITORY,
    PLUGIN_LIBRARY_NAME,
    REPO_ROOT,
    RESTRICTED_APIS,
    TENSORRT_MODELS,
    VARIANTS,
)

# Largest HTTP request body accepted, where the server supports --http-max-input-size (Triton >= 25.05).
# Bigger than the per-image limit of mnist_preprocess (8 MiB) so that those get the model's own error.
HTTP_MAX_INPUT_BYTES = 32 * 1024 * 1024

TENSORRT_RUNTIME_SONAMES = ("libnvinfer.so.11", "libnvinfer.so.10")
TRITONSERVER_CANDIDATES = ("/opt/tritonserver/bin/tritonserver",)


class ServingError(RuntimeError):
    """A problem that stops the server from starting, with a message meant for the user."""


# --------------------------------------------------------------------------------------------------------
# Ports and endpoints


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the server binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _client_host(bind_host: str) -> str:
    """Where a local client connects to reach a server bound to `bind_host`."""
    return "127.0.0.1" if bind_host in ("0.0.0.0", "", "::") else bind_host


@dataclass(frozen=True)
class Ports:
    http: int = DEFAULT_HTTP_PORT
    grpc: int = DEFAULT_GRPC_PORT
    metrics: int = DEFAULT_METRICS_PORT

    @classmethod
    def free(cls, host: str = "127.0.0.1") -> Ports:
        return cls(free_port(host), free_port(host), free_port(host))


# --------------------------------------------------------------------------------------------------------
# Variant detection


@dataclass
class HostProbe:
    """What this host offers for the TensorRT variant; `missing` says why it cannot run, if it cannot."""

    tritonserver: Path | None = None
    gpus: list[str] = field(default_factory=list)
    tensorrt_version: str | None = None
    missing: list[str] = field(default_factory=list)

    @property
    def tensorrt_ready(self) -> bool:
        return not self.missing


def find_system_tritonserver() -> Path | None:
    explicit = os.environ.get("TRITONSERVER_BIN")
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    on_path = shutil.which("tritonserver")
    # PyTriton's wheel puts no `tritonserver` on PATH, but guard against a wrapper that does.
    if on_path and "pytriton" not in on_path:
        return Path(on_path)
    for candidate in TRITONSERVER_CANDIDATES:
        if Path(candidate).is_file():
            return Path(candidate)
    return None


def list_gpus() -> list[str]:
    nvidia_smi = shutil.which("nvidia-smi")
    if not nvidia_smi:
        return []
    try:
        result = subprocess.run([nvidia_smi, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line for line in result.stdout.splitlines() if line.startswith("GPU ")]


def tensorrt_runtime_version() -> str | None:
    """Version of the TensorRT runtime library the dynamic loader finds, e.g. '10.13.3', or None."""
    for soname in TENSORRT_RUNTIME_SONAMES:
        try:
            library = ctypes.CDLL(soname)
        except OSError:
            continue
        encoded = library.getInferLibVersion()  # major * 10000 + minor * 100 + patch
        return f"{encoded // 10000}.{encoded // 100 % 100}.{encoded % 100}"
    return None


def probe_host() -> HostProbe:
    probe = HostProbe(tritonserver=find_system_tritonserver(), gpus=list_gpus())
    probe.tensorrt_version = tensorrt_runtime_version()
    if not probe.gpus:
        probe.missing.append("no NVIDIA GPU (nvidia-smi -L lists none)")
    if probe.tensorrt_version is None:
        probe.missing.append(f"no TensorRT runtime ({' / '.join(TENSORRT_RUNTIME_SONAMES)} not loadable)")
    if probe.tritonserver is None:
        probe.missing.append("no system tritonserver (PATH, /opt/tritonserver/bin or $TRITONSERVER_BIN)")
    return probe


def choose_variant(requested: str, probe: HostProbe | None = None) -> tuple[str, str]:
    """Resolve 'auto' | 'tensorrt' | 'cpu' to a variant and a one-line reason."""
    if requested not in ("auto", *VARIANTS):
        raise ServingError(f"unknown variant {requested!r}; choose auto, tensorrt or cpu")
    if requested == "cpu":
        return "cpu", "requested"
    probe = probe or probe_host()
    if probe.tensorrt_ready:
        return (
            "tensorrt",
            f"{len(probe.gpus)} GPU(s), TensorRT {probe.tensorrt_version}, {probe.tritonserver}",
        )
    if requested == "tensorrt":
        raise ServingError("the TensorRT variant cannot run here: " + "; ".join(probe.missing))
    return "cpu", "TensorRT variant unavailable: " + "; ".join(probe.missing)


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
    try:
        import pytriton  # noqa: PLC0415 - optional extra `serve`
    except ImportError as error:
        raise ServingError(
            "the CPU variant needs the tritonserver binary from the `nvidia-pytriton` wheel; "
            "install it with `pip install -e '.[serve]'` (make serve does this)"
        ) from error
    package_dir = Path(pytriton.__file__).resolve().parent
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
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        (backend_dir / name).symlink_to(source_dir / name)
    shutil.copy2(stub, backend_dir / "triton_python_backend_stub")
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
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


# --------------------------------------------------------------------------------------------------------
# TensorRT variant: plugin library and engines


def system_triton_python_path(existing: str | None) -> list[str]:
    """PYTHONPATH for the Python backend (mnist_preprocess) of a system tritonserver.

    Its stub embeds the system Python (/usr, e.g. inside NVIDIA's container). The model needs this repository
    (trt_plugin_kit) and Pillow; when this virtual environment was made from that same Python, its packages
    are binary-compatible and are added too. Otherwise Pillow must be installed for the system Python.
    """
    paths = [str(REPO_ROOT)]
    if Path(sys.base_prefix) == Path("/usr") and sys.prefix != sys.base_prefix:
        paths += [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    if existing:
        paths.append(existing)
    return list(dict.fromkeys(paths))


def find_tensorrt_headers() -> Path | None:
    candidates = [os.environ.get("TENSORRT_INCLUDE_DIR", "")]
    if os.environ.get("TENSORRT_ROOT"):
        candidates.append(str(Path(os.environ["TENSORRT_ROOT"]) / "include"))
    candidates += ["/usr/include/x86_64-linux-gnu", "/usr/include/aarch64-linux-gnu", "/usr/include"]
    for candidate in candidates:
        if candidate and (Path(candidate) / "NvInfer.h").is_file():
            return Path(candidate)
    return None


def ensure_plugin_library(tensorrt_version: str, explicit: Path | None = None) -> Path:
    """The plugin library for the TensorRT runtime on this host, compiled with CMake if missing."""
    if explicit is not None:
        if not explicit.is_file():
            raise ServingError(f"plugin library {explicit} does not exist")
        return explicit.resolve()
    build_dir = BUILD_DIR / f"trt-{tensorrt_version}"
    library = build_dir / PLUGIN_LIBRARY_NAME
    if library.is_file():
        return library
    headers = find_tensorrt_headers()
    if headers is None or shutil.which("cmake") is None:
        raise ServingError(
            f"{library} is missing and cannot be built here (need cmake and TensorRT headers, NvInfer.h; set "
            "TENSORRT_INCLUDE_DIR). Build it with `make plugins` or pass --plugin-library."
        )
    print(f"Building {PLUGIN_LIBRARY_NAME} against TensorRT {tensorrt_version} headers in {headers} ...")
    subprocess.run(
        ["cmake", "-S", str(REPO_ROOT / "plugins"), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
         f"-DTENSORRT_INCLUDE_DIR={headers}"],
        check=True,
    )  # fmt: skip
    subprocess.run(["cmake", "--build", str(build_dir), "-j", str(os.cpu_count() or 2)], check=True)
    if not library.is_file():
        raise ServingError(f"the CMake build finished but {library} was not produced")
    return library


def ensure_engines(model_repository: Path, plugin_library: Path) -> None:
    """Build the TensorRT engines (1/model.plan) that are missing, with build_engines.py."""
    missing = [
        name for name in TENSORRT_MODELS if not (model_repository / name / "1" / "model.plan").is_file()
    ]
    if not missing:
        return
    print(f"Building TensorRT engines for {', '.join(missing)} with build_engines.py ...")
    command = [sys.executable, str(REPO_ROOT / "build_engines.py"), "--plugin-library", str(plugin_library)]
    if subprocess.run(command, check=False).returncode != 0:
        raise ServingError(
            "build_engines.py failed (it needs the TensorRT Python package of the runtime version); see the "
            "output above. On a GPU host, `docker compose up` builds them in NVIDIA's TensorRT container."
        )
    still_missing = [n for n in TENSORRT_MODELS if not (model_repository / n / "1" / "model.plan").is_file()]
    if still_missing:
        raise ServingError(f"build_engines.py did not write engines for {', '.join(still_missing)}")


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
    ):
        if variant not in VARIANTS:
            raise ServingError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
        self.variant = variant
        self.ports = ports or Ports()
        self.host = host
        self.model_repository = Path(model_repository).resolve()
        self.log_file = log_file
        self.log_verbose = log_verbose
        self.plugin_library = plugin_library
        # Without a known key the restricted APIs are simply closed.
        self.admin_key = admin_key or os.environ.get("TRITON_ADMIN_KEY") or secrets.token_urlsafe(32)
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

    def describe_variant(self) -> str:
        if self.variant == "cpu":
            return (
                f"cpu (PyTriton's tritonserver, Python backend, --model-config-name={CPU_MODEL_CONFIG_NAME}: "
                "ONNX Runtime and NumPy)"
            )
        return f"tensorrt (TensorRT engines, plugins from {self.plugin_library} in LD_PRELOAD)"

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
        self._workdir = Path(tempfile.mkdtemp(prefix="trt_plugin_kit_triton_"))
        try:
            binary, env, variant_args = self._prepare_variant()
            self.command = [str(binary), *self._common_args(supported_options(binary, env)), *variant_args]
            self.command += self.extra_args
            if self.log_file is not None:
                self.log_file.parent.mkdir(parents=True, exist_ok=True)
                self._log_handle = open(self.log_file, "ab")  # noqa: SIM115 - closed in stop()
            # Own session: a Ctrl-C in the terminal reaches only the launcher, which then shuts the server
            # (and its Python backend stubs, same process group) down in order.
            self.process = subprocess.Popen(
                self.command,
                env=env,
                cwd=self._workdir,
                stdin=subprocess.DEVNULL,
                stdout=self._log_handle,
                stderr=subprocess.STDOUT if self._log_handle else None,
                start_new_session=True,
            )
        except BaseException:
            self.stop()
            raise

    def _prepare_variant(self) -> tuple[Path, dict[str, str], list[str]]:
        env = dict(os.environ)
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
        # TensorRT resolves plugin creators from libraries loaded in the process; preloading registers ours
        # before the TensorRT backend deserialises the engines.
        env["LD_PRELOAD"] = os.pathsep.join(filter(None, [str(self.plugin_library), env.get("LD_PRELOAD")]))
        env["PYTHONPATH"] = os.pathsep.join(system_triton_python_path(env.get("PYTHONPATH")))
        return probe.tritonserver, env, []

    def _common_args(self, help_text: str) -> list[str]:
        args = [
            f"--model-repository={self.model_repository}",
            # Hardened defaults: load exactly what the repository holds at start, never load/unload remotely.
            "--model-control-mode=none",
            "--strict-readiness=true",
            "--exit-on-error=true",
            "--disable-auto-complete-config",
            f"--http-address={self.host}",
            f"--http-port={self.ports.http}",
            f"--grpc-address={self.host}",
            f"--grpc-port={self.ports.grpc}",
            "--allow-metrics=true",
            f"--metrics-address={self.host}",
            f"--metrics-port={self.ports.metrics}",
            "--allow-sagemaker=false",
            "--allow-vertex-ai=false",
            f"--exit-timeout-secs={self.exit_timeout_s}",
            f"--log-verbose={self.log_verbose}",
        ]
        restriction = f"{','.join(RESTRICTED_APIS)}:{ADMIN_HEADER}={self.admin_key}"
        if "--http-restricted-api" in help_text:
            args.append(f"--http-restricted-api={restriction}")
        if "--grpc-restricted-protocol" in help_text:
            args.append(f"--grpc-restricted-protocol={restriction}")
        if "--http-max-input-size" in help_text:
            args.append(f"--http-max-input-size={HTTP_MAX_INPUT_BYTES}")
        return args

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        if self.log_file is None or not self.log_file.is_file():
            return "(server output went to the console)"
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def wait_until_ready(self, timeout_s: float = 180.0) -> None:
        """Poll /v2/health/ready (strict readiness: every model loaded) until it answers 200."""
        if self.process is None:
            raise ServingError("the server was not started")
        url = f"http://{self.http_url}/v2/health/ready"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServingError(
                    f"tritonserver exited with code {self.process.returncode} before it was ready. "
                    f"Last lines of its log:\n{self.log_tail()}"
                )
            with contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError):
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return
            time.sleep(0.25)
        raise ServingError(
            f"tritonserver was not ready after {timeout_s:.0f} s. Last lines:\n{self.log_tail()}"
        )

    def stop(self) -> None:
        """SIGTERM (Triton drains in-flight requests), then SIGKILL the process group if it hangs."""
        process, self.process = self.process, None
        if process is not None:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=self.exit_timeout_s + 15)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            # Python backend stubs left behind by a crashed server share its process group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        if self._log_handle is not None:
            self._log_handle.close()
            self._log_handle = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
