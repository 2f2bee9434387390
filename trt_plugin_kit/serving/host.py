"""The host side of serving: ports, which variant this machine can run, and the TensorRT variant's inputs.

Split out of :mod:`trt_plugin_kit.serving.server` (which re-exports these names): finding a system
tritonserver,
GPUs and the TensorRT runtime, and making sure the plugin library and the engines exist before Triton starts.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from trt_plugin_kit.engines import artifact_checks
from trt_plugin_kit.interface import (
    BUILD_DIR,
    DEFAULT_GRPC_PORT,
    DEFAULT_HTTP_PORT,
    DEFAULT_METRICS_PORT,
    PLUGIN_LIBRARY_NAME,
    REPO_ROOT,
    TENSORRT_MODELS,
    VARIANTS,
)

TENSORRT_RUNTIME_SONAMES = artifact_checks.TENSORRT_RUNTIME_SONAMES
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


class PortTaken(ServingError):
    """A public port another process holds: a configuration problem, never retried (serve.py exits 1)."""


PORT_ROLES = ("HTTP", "gRPC", "metrics")


def check_ports_free(host: str, ports: Ports) -> None:
    """Refuse to start on a port another process listens on, before anything starts.

    Found by binding it as the edge will (SO_REUSEADDR, so a TIME_WAIT left by our own last server is no
    obstacle, a listener is): without this check a server of the kit already on the port answered our
    readiness wait, and serve.py reported ready for it.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for role, port in zip(PORT_ROLES, (ports.http, ports.grpc, ports.metrics), strict=True):
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as error:
                raise PortTaken(
                    f"cannot listen on {host}:{port} ({role} port): {error.strerror or error}; another "
                    "process holds it (another `make serve`?). Stop it, or choose other ports: "
                    "--http-port/--grpc-port/--metrics-port or TRITON_HTTP_PORT/TRITON_GRPC_PORT/"
                    "TRITON_METRICS_PORT (docs/serving.md)"
                ) from None


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on TCP `port` (any address), from /proc/net/tcp and tcp6."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            # local_address is HEXADDR:HEXPORT; state 0A is LISTEN.
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _session_socket_inodes(session_id: int) -> set[str] | None:
    """Socket inodes open in the processes of session `session_id` (a process started with
    start_new_session leads one; its children stay in it); None where /proc cannot say."""
    inodes: set[str] = set()
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return None
    for pid in entries:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            # Fields after the command name (which may hold spaces): state ppid pgrp session ...
            if int(stat.rsplit(")", 1)[1].split()[3]) != session_id:
                continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except (OSError, ValueError, IndexError):
            continue
    return inodes


def ports_answered_by_others(ports: Ports, session_id: int) -> list[str]:
    """The public ports whose listener is not a process of our session, as 'ROLE port N' (empty: all ours).
    Where /proc is unavailable nothing can be said, and the pre-start check stands alone."""
    ours = _session_socket_inodes(session_id)
    if ours is None:
        return []
    others = []
    for role, port in zip(PORT_ROLES, (ports.http, ports.grpc, ports.metrics), strict=True):
        listeners = _listening_inodes(port)
        if listeners and not listeners & ours:
            others.append(f"{role} port {port}")
    return others


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


CUDA_DRIVER = "libcuda.so.1"
CUDA_ERROR_NO_DEVICE = 100  # cuda.h's CUresult


def list_gpus() -> tuple[list[str], str]:
    """The GPUs CUDA can use in this process, as "GPU i: name", and, when there are none, why.

    Asked of CUDA's driver API (libcuda.so.1, what tritonserver and TensorRT use), not of nvidia-smi: that
    lists every GPU the kernel driver knows, also where CUDA cannot use one (CUDA_VISIBLE_DEVICES hides it,
    a container without the toolkit's libcuda, a driver older than the CUDA the image needs)."""
    try:
        cuda = ctypes.CDLL(CUDA_DRIVER)
    except OSError:
        return [], f"no CUDA driver ({CUDA_DRIVER} not loadable)"
    status = cuda.cuInit(0)
    if status == CUDA_ERROR_NO_DEVICE:  # on an H200 with CUDA_VISIBLE_DEVICES= (nvidia-smi -L still lists it)
        return [], "CUDA sees no GPU (CUDA_ERROR_NO_DEVICE: hidden by CUDA_VISIBLE_DEVICES, or none usable)"
    if status != 0:
        return [], f"CUDA's cuInit failed with CUresult {status}"
    count = ctypes.c_int(0)
    status = cuda.cuDeviceGetCount(ctypes.byref(count))
    if status != 0 or count.value == 0:
        return [], f"CUDA sees no GPU (cuDeviceGetCount: CUresult {status}, {count.value} devices)"
    gpus = []
    for index in range(count.value):
        device, name = ctypes.c_int(0), ctypes.create_string_buffer(256)
        if (
            cuda.cuDeviceGet(ctypes.byref(device), index) == 0
            and cuda.cuDeviceGetName(name, 256, device) == 0
        ):
            gpus.append(f"GPU {index}: {name.value.decode(errors='replace')}")
    return gpus, ""


def tensorrt_runtime_version() -> str | None:
    """Version of the TensorRT runtime library the dynamic loader finds, as major.minor.patch (the folder
    `make plugins` builds into: build/trt-<that>), or None. The full version: artifact_checks."""
    found = artifact_checks.runtime_version()
    return ".".join(found[1].split(".")[:3]) if found else None


def probe_host() -> HostProbe:
    gpus, why_none = list_gpus()
    probe = HostProbe(tritonserver=find_system_tritonserver(), gpus=gpus)
    probe.tensorrt_version = tensorrt_runtime_version()
    if not probe.gpus:
        probe.missing.append(f"no NVIDIA GPU: {why_none}")
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
        return checked_links(explicit.resolve())
    build_dir = BUILD_DIR / f"trt-{tensorrt_version}"
    library = build_dir / PLUGIN_LIBRARY_NAME
    if library.is_file():
        return checked_links(library)
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
    return checked_links(library)


def checked_links(library: Path) -> Path:
    """The library, once ldd shows it links the TensorRT runtime found here: Triton's TensorRT backend
    dlopen()s it RTLD_LOCAL, and one that does not link libnvinfer loads and registers no plugin (its engines
    then fail to load far from the cause). Where no runtime is found, the probe has already said so."""
    found = artifact_checks.runtime_version()
    if found is not None:
        try:
            artifact_checks.check_links(library, found[0])
        except artifact_checks.CheckFailed as error:
            raise ServingError(f"the plugin library cannot serve here: {error}") from None
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
