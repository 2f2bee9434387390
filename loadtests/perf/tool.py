"""Where NVIDIA's perf_analyzer runs from: natively, or from a cached Debian 13 (trixie) root.

perf_analyzer is published on PyPI as the `perf-analyzer` wheel (a C++ binary tagged manylinux_2_38: it needs
glibc 2.38 or newer). Three ways to run it, tried in this order by `how="auto"`:

  native  the binary of `pip install 'trt-plugin-kit[perf]'` (this venv's bin/ or PATH) on a host whose glibc
          is 2.38 or newer (Debian 13, Ubuntu 24.04, ...)
  chroot  older hosts (Debian 12: glibc 2.36), as root: the binary inside a Debian 13 root made once with
          mmdebstrap or debootstrap and kept in build/perf-analyzer/ (the second run starts at once),
          entered with `unshare --mount` + `chroot`. No daemon, no image: the process shares the host's
          network (the server's loopback ports) and /dev/shm (system shared memory), and the mounts vanish
          with it.
  docker  where root is not available but a Docker daemon is: the same root imported as an image (make
          perf-image, also the compose service's image), run with host networking and the host's IPC.

Nothing comes from a registry at run time: the root's packages come from a Debian mirror (like the compose
base image of scripts/compose_test.py) and the wheels (perf-analyzer, and NVIDIA's CUDA runtime, which
perf_analyzer loads for --shared-memory) from the host's wheelhouse (docker/wheelhouse/, filled once with
`pip download`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from trt_plugin_kit.deploy import debian_root
from trt_plugin_kit.deploy.wheelhouse import WHEELHOUSE
from trt_plugin_kit.interface import BUILD_DIR

PERF_ANALYZER_VERSION = "2.60.0"
PERF_ANALYZER_REQUIREMENT = f"perf-analyzer=={PERF_ANALYZER_VERSION}"
WHEEL_PLATFORM = "manylinux_2_38_x86_64"
MIN_GLIBC = (2, 38)
DEBIAN_SUITE = "trixie"
# What the binary links (libssl, libcrypto, zlib, libstdc++), and Debian's Python with what the data generator
# imports, for the compose service that runs the whole of `python -m loadtests.perf` inside. No matplotlib (it
# pulls SciPy: minutes more of the root's making): the service's report says how to draw its plot on the host.
DEBIAN_PACKAGES = "ca-certificates,libssl3t64,zlib1g,libstdc++6,python3,python3-numpy,python3-pil"
ROOT_DIR = BUILD_DIR / "perf-analyzer" / f"{DEBIAN_SUITE}-{PERF_ANALYZER_VERSION}"
ROOT_STAMP = ".trt-plugin-kit-perf-root"  # written last: a root without it is half made and made again
IN_ROOT_BINARY = "/opt/perf_analyzer/bin/perf_analyzer"
IMAGE = f"trt-plugin-kit/perf-analyzer:{PERF_ANALYZER_VERSION}-{DEBIAN_SUITE}"
MODES = ("auto", "native", "chroot", "docker")


class ToolUnavailable(RuntimeError):
    """perf_analyzer cannot run here; the message says why and what would make it run."""


def glibc_version() -> tuple[int, int]:
    text = os.confstr("CS_GNU_LIBC_VERSION") or "glibc 0.0"  # "glibc 2.36"
    major, minor = text.split()[-1].split(".")[:2]
    return int(major), int(minor)


def native_binary() -> Path | None:
    """The perf_analyzer of the wheel installed in this environment (or on PATH), if glibc can run it."""
    if glibc_version() < MIN_GLIBC:
        return None
    for candidate in (Path(sys.prefix) / "bin" / "perf_analyzer", shutil.which("perf_analyzer")):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0


def image_present() -> bool:
    return subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode == 0


@dataclass(frozen=True)
class Wheel:
    requirement: str
    filename: str
    platform: str


# perf_analyzer dlopens libcudart.so for any --shared-memory (system too) and aborts without it; NVIDIA's CUDA
# runtime wheel gives the root one (loaded only: no GPU is needed for system shared memory).
WHEELS = (
    Wheel(PERF_ANALYZER_REQUIREMENT, f"perf_analyzer-{PERF_ANALYZER_VERSION}-py3-none-{WHEEL_PLATFORM}.whl",
          WHEEL_PLATFORM),
    Wheel("nvidia-cuda-runtime-cu12==12.9.79",
          "nvidia_cuda_runtime_cu12-12.9.79-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
          "manylinux2014_x86_64"),
)  # fmt: skip
IN_ROOT_LIBRARIES = "/opt/perf_analyzer/lib"


def wheel_path(wheel: Wheel) -> Path:
    """The wheel in the host's wheelhouse, downloaded there once (pip, PyPI) if missing."""
    path = WHEELHOUSE / wheel.filename
    if path.is_file():
        return path
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    print(f"perf-analyzer: pip download {wheel.requirement} into {WHEELHOUSE}", flush=True)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    command += ["--platform", wheel.platform, "--dest", str(WHEELHOUSE), wheel.requirement]
    if subprocess.run(command, check=False).returncode != 0 or not path.is_file():
        raise ToolUnavailable(
            f"{wheel.filename} is not in {WHEELHOUSE} and pip could not download it; put it there"
        )
    return path


def _stamp_lines(root: Path) -> list[str]:
    stamp = root / ROOT_STAMP
    return stamp.read_text().splitlines() if stamp.is_file() else []


def expected_stamp() -> list[str]:
    """What a whole root records: its Debian packages, then the wheels unpacked into it."""
    return [f"{DEBIAN_SUITE}: {DEBIAN_PACKAGES}", *(wheel.filename for wheel in WHEELS)]


def root_ready(root: Path = ROOT_DIR) -> bool:
    """Whether the root is made whole, with the packages and wheels asked for now."""
    return _stamp_lines(root) == expected_stamp() and (root / IN_ROOT_BINARY.lstrip("/")).is_file()


def make_root(root: Path = ROOT_DIR) -> Path:
    """The Debian 13 root with perf_analyzer in /opt/perf_analyzer, made once (debootstrap: a few minutes);
    new wheels go into an existing root of the same packages without a second debootstrap."""
    if root_ready(root):
        return root
    if os.geteuid() != 0 or debian_root.tool() is None:
        raise ToolUnavailable(
            f"perf_analyzer {PERF_ANALYZER_VERSION} needs glibc >= {MIN_GLIBC[0]}.{MIN_GLIBC[1]} (this host: "
            f"{'.'.join(map(str, glibc_version()))}); its Debian 13 root ({root}) is made with mmdebstrap or "
            f"debootstrap as root ({debian_root.INSTALL_HINT}). Or install it natively on a newer host "
            "(pip install '.[perf]'), or give a Docker daemon the image (make perf-image where root is)."
        )
    wheels = [wheel_path(wheel) for wheel in WHEELS]
    if _stamp_lines(root)[:1] != expected_stamp()[:1]:
        debootstrap(root)
    target = root / IN_ROOT_BINARY.lstrip("/").split("/bin/")[0]
    shutil.rmtree(target, ignore_errors=True)
    install_perf_analyzer(wheels[0], target)
    install_cuda_runtime(wheels[1], root / IN_ROOT_LIBRARIES.lstrip("/"))
    (root / ROOT_STAMP).write_text("\n".join(expected_stamp()) + "\n")
    return root


def debootstrap(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    root.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"{root.name}-", dir=root.parent))
    command = debian_root.command(DEBIAN_SUITE, DEBIAN_PACKAGES, scratch)
    log = root.parent / "debian-root.log"
    print(f"perf-analyzer: {command[0]} {DEBIAN_SUITE} into {root} (once, a minute; log {log})", flush=True)
    with log.open("w") as handle:
        done = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        raise ToolUnavailable(f"{command[0]} {DEBIAN_SUITE} failed (exit {done.returncode}); see {log}")
    debian_root.clear_apt_caches(scratch)
    (scratch / ROOT_STAMP).write_text(expected_stamp()[0] + "\n")  # the packages; wheels come next
    scratch.rename(root)


def install_perf_analyzer(wheel: Path, target: Path) -> None:
    """The wheel's perf_analyzer package unpacked as target (target/bin/perf_analyzer made executable)."""
    with zipfile.ZipFile(wheel) as archive:
        members = [name for name in archive.namelist() if name.startswith("perf_analyzer/")]
        archive.extractall(target.parent, members)
    if target.name != "perf_analyzer":
        (target.parent / "perf_analyzer").rename(target)
    (target / "bin" / "perf_analyzer").chmod(0o755)


def install_cuda_runtime(wheel: Path, lib_dir: Path) -> None:
    """libcudart.so.12 of NVIDIA's wheel into lib_dir, with the unversioned name perf_analyzer dlopens."""
    lib_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        member = next(name for name in archive.namelist() if name.endswith("/libcudart.so.12"))
        (lib_dir / "libcudart.so.12").write_bytes(archive.read(member))
    (lib_dir / "libcudart.so").unlink(missing_ok=True)
    (lib_dir / "libcudart.so").symlink_to("libcudart.so.12")


def make_image(root: Path = ROOT_DIR) -> str:
    """IMAGE: `docker import` of the root (made first if needed); reused while present."""
    if image_present():
        return IMAGE
    make_root(root)
    print(f"perf-analyzer: docker import {root} as {IMAGE}", flush=True)
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    imported = subprocess.run(
        [
            "docker",
            "import",
            "--change",
            "ENV PATH=/opt/perf_analyzer/bin:/usr/bin:/bin",
            "--change",
            f"ENV LD_LIBRARY_PATH={IN_ROOT_LIBRARIES}",
            "-",
            IMAGE,
        ],  # fmt: skip
        stdin=tar.stdout,
        capture_output=True,
        text=True,
        check=False,
    )
    if tar.wait() != 0 or imported.returncode != 0:
        raise ToolUnavailable(f"docker import of {root} failed: {imported.stderr.strip()}")
    return IMAGE


@dataclass(frozen=True)
class PerfAnalyzer:
    """How to start perf_analyzer here; `command(args, workdir)` gives the argv. Files it reads or writes
    must lie under workdir (the folder is mounted at the same path inside the root or container)."""

    mode: str
    binary: Path | None = None
    root: Path | None = None

    def describe(self) -> str:
        if self.mode == "native":
            return f"perf_analyzer {PERF_ANALYZER_VERSION}, native ({self.binary})"
        if self.mode == "chroot":
            return (
                f"perf_analyzer {PERF_ANALYZER_VERSION} in a Debian {DEBIAN_SUITE} root (chroot, {self.root})"
            )
        return f"perf_analyzer {PERF_ANALYZER_VERSION} in the Docker image {IMAGE} (host network)"

    def command(self, args: list[str], workdir: Path) -> list[str]:
        workdir = workdir.resolve()
        if self.mode == "native":
            return [str(self.binary), *args]
        if self.mode == "docker":
            return [
                "docker", "run", "--rm", "--network", "host", "--ipc", "host",
                "--volume", f"{workdir}:{workdir}", "--workdir", str(workdir), IMAGE, IN_ROOT_BINARY, *args,
            ]  # fmt: skip
        # A private mount namespace: the binds below vanish when perf_analyzer exits, nothing to clean up.
        root = self.root.resolve()
        script = (
            'set -e; root="$1"; work="$2"; shift 2; mkdir -p "$root$work"; '
            'mount --bind "$work" "$root$work"; mount --rbind /dev "$root/dev"; '
            'mount -t proc proc "$root/proc"; '
            'for f in /etc/hosts /etc/resolv.conf; do [ -f "$f" ] && touch "$root$f" '
            '&& mount --bind "$f" "$root$f"; done; '
            'cd /; exec chroot "$root" sh -c \'cd "$0" && exec "$@"\' "$work" "$@"'
        )
        return [
            "unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "perf-chroot",
            str(root), str(workdir), "env", f"LD_LIBRARY_PATH={IN_ROOT_LIBRARIES}", IN_ROOT_BINARY, *args,
        ]  # fmt: skip


def why_cannot_run() -> str | None:
    """None where `find("auto")` gives a perf_analyzer (making the root if needed), else why not (tests skip
    with it)."""
    if native_binary() or glibc_version() >= MIN_GLIBC:
        return None  # make perf installs the wheel of the extra perf where glibc is new enough
    if os.geteuid() == 0 and shutil.which("unshare") and (root_ready() or debian_root.tool()):
        return None
    if docker_answers() and image_present():
        return None
    return (
        f"perf_analyzer needs glibc >= 2.38 (here {'.'.join(map(str, glibc_version()))}), else root "
        "with mmdebstrap or debootstrap and unshare, else a Docker daemon with its image (make perf-image)"
    )


def find(how: str = "auto") -> PerfAnalyzer:
    """The perf_analyzer to use (see the module's docstring); raises ToolUnavailable saying why none runs."""
    if how not in MODES:
        raise ValueError(f"expected one of {', '.join(MODES)}, got {how!r}")
    if how in ("auto", "native"):
        binary = native_binary()
        if binary:
            return PerfAnalyzer("native", binary=binary)
        if how == "native":
            raise ToolUnavailable(
                f"no native perf_analyzer: it needs glibc >= {MIN_GLIBC[0]}.{MIN_GLIBC[1]} (here "
                f"{'.'.join(map(str, glibc_version()))}) and `pip install '.[perf]'`"
            )
    if how == "chroot" or (how == "auto" and os.geteuid() == 0 and (root_ready() or debian_root.tool())):
        if os.geteuid() != 0:
            raise ToolUnavailable("the chroot way needs root (unshare --mount, chroot)")
        return PerfAnalyzer("chroot", root=make_root())
    if how in ("auto", "docker") and docker_answers():
        make_image()
        return PerfAnalyzer("docker")
    if how == "docker":
        raise ToolUnavailable("--tool docker: no Docker daemon answers here (`docker info` failed)")
    raise ToolUnavailable(
        f"perf_analyzer {PERF_ANALYZER_VERSION} cannot run here: it needs glibc >= "
        f"{MIN_GLIBC[0]}.{MIN_GLIBC[1]} (this host: {'.'.join(map(str, glibc_version()))}) for a native "
        "install (pip install '.[perf]'), else root with mmdebstrap or debootstrap (its Debian 13 root, run "
        "by chroot), else a Docker daemon with its image (make perf-image, as root)."
    )
