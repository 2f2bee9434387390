"""The host's wheelhouse, docker/wheelhouse/: wheels for builds that cannot reach a package index. Two
owners share the folder: the compose test's `pip wheel` of the images' requirements (scripts/compose_test.py)
and make perf's perf_analyzer and CUDA runtime wheels (loadtests.perf.tool), which its Debian 13 root
installs. A new set of one owner's wheels replaces only that owner's: the other's may be being read."""

from __future__ import annotations

from trt_plugin_kit.interface import REPO_ROOT

WHEELHOUSE = REPO_ROOT / "docker" / "wheelhouse"


def stale_wheels(stamp_lines: list[str], present: list[str]) -> list[str]:
    """The wheels the compose test's new wheelhouse replaces: those its last one made, named in its stamp
    after the key. A stamp of the older format (the key alone) names none: then every wheel goes, as it did
    before the folder had two owners. No stamp: nothing of the compose test's is there."""
    if len(stamp_lines) > 1:
        return [name for name in stamp_lines[1:] if name in present]
    return list(present) if stamp_lines else []
