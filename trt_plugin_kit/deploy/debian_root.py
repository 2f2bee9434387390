"""Debian roots made from Debian's own packages, where no image registry can be reached: the compose test's
Python base image (``scripts/compose_test.py``) and perf_analyzer's Debian 13 root (``loadtests.perf.tool``).

mmdebstrap where installed (Debian package ``mmdebstrap``): apt resolves and unpacks in one pass, half of
debootstrap's CPU (bookworm minbase with Python, measured here: 19 against 39 CPU-s), and it clears apt's
caches itself; else debootstrap, the same root. Both need root here.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

TOOLS = ("mmdebstrap", "debootstrap")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
INSTALL_HINT = "apt-get install mmdebstrap (or debootstrap); .ci/run does"


def tool() -> str | None:
    """The first of TOOLS on PATH, or None."""
    return next((name for name in TOOLS if shutil.which(name)), None)


def command(suite: str, packages: str, directory: Path) -> list[str]:
    """The command that makes ``directory`` a minimal ``suite`` root with ``packages`` (comma-separated);
    ``$DEBIAN_MIRROR`` overrides the mirror. Raises FileNotFoundError where neither tool is installed."""
    chosen = tool()
    if chosen is None:
        raise FileNotFoundError(f"neither mmdebstrap nor debootstrap is installed ({INSTALL_HINT})")
    mirror = os.environ.get("DEBIAN_MIRROR", DEFAULT_MIRROR)
    return [chosen, "--variant=minbase", f"--include={packages}", suite, str(directory), mirror]


def clear_apt_caches(directory: Path) -> None:
    """Downloaded packages and package lists out of the root (debootstrap keeps them; mmdebstrap does not)."""
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for entry in (directory / cache).glob("*"):
            if entry.is_file():
                entry.unlink()
