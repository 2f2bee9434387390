"""CI part of issue 9 that needs no GPU: `plugin_stress fuzz` (plugins/harness/STRESS.md) against the plugin
library built for every vendored TensorRT header set.

`make test` builds build/trt-<version>/plugin_stress and libtrt_plugin_kit.so (`make plugins`) before pytest
runs; a missing binary is a failure that says so, not a skip. 2,000 collections per creator and phase here
(about 4 s per header set on 2 cores); the GPU machine runs 10,000 (scripts/gpu_stress.sh).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from trt_plugin_kit.interface import REPO_ROOT
from trt_plugin_kit.specs import spec as plugin_spec

BUILD_DIR = Path(os.environ.get("BUILD_DIR", REPO_ROOT / "build"))
if not BUILD_DIR.is_absolute():
    BUILD_DIR = REPO_ROOT / BUILD_DIR
TRT_VERSIONS = os.environ.get("TRT_VERSIONS", "10.13.3 11.1").split()
CI_ITERATIONS = 2000
PLUGINS = tuple(plugin_spec.all_specs())  # one per plugin folder


def built(version: str) -> tuple[Path, Path]:
    binary = BUILD_DIR / f"trt-{version}" / "plugin_stress"
    library = BUILD_DIR / f"trt-{version}" / "libtrt_plugin_kit.so"
    if not binary.is_file() or not library.is_file():
        pytest.fail(
            f"{binary} or {library} is missing: build them with `make plugins` (`make test` does it before "
            "pytest)",
            pytrace=False,
        )
    return binary, library


def stress(binary: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, timeout=timeout, check=False, cwd=REPO_ROOT
    )


def explain(result: subprocess.CompletedProcess) -> str:
    return (
        f"exit {result.returncode}\nstdout (end):\n{result.stdout[-6000:]}\nstderr:\n{result.stderr[-3000:]}"
    )


@pytest.mark.timeout(600)
@pytest.mark.parametrize("version", TRT_VERSIONS)
def test_fuzzing_every_creator_finds_no_crash_and_every_rejection_is_logged(version):
    binary, library = built(version)
    result = stress(
        binary, "fuzz", "--library", str(library), "--iterations", str(CI_ITERATIONS), "--seed", "1"
    )
    assert result.returncode == 0, explain(result)
    lines = result.stdout.splitlines()
    assert lines[-1] == f"stress: {len(PLUGINS)} passed, 0 failed", explain(result)
    for plugin in PLUGINS:
        summary = next((line for line in lines if line.startswith(f"PASS fuzz {plugin} ::")), None)
        assert summary is not None, explain(result)
        counts = dict(
            (key, int(value))
            for value, key in re.findall(
                r"(\d+) (collections|accepted|rejected|serialize round trips)", summary
            )
        )
        assert counts["collections"] == CI_ITERATIONS
        assert counts["accepted"] + counts["rejected"] == 2 * CI_ITERATIONS  # both phases, each judged
        # The generator reaches both outcomes for every creator (ConcatCopy has no fields: few rejections).
        assert counts["accepted"] > 0 and counts["rejected"] > 0, summary
        assert counts["serialize round trips"] == counts["accepted"], summary
        # Collections from the spec: the valid ones were all accepted, those breaking one rule all rejected.
        valid, breaking = map(
            int, re.search(r"spec: (\d+) valid .*, (\d+) breaking one rule", summary).groups()
        )
        assert valid > 0, summary
        assert breaking > 0 or not plugin_spec.get(plugin).fields, summary


def test_a_fuzz_iteration_reproduces_exactly_from_its_seed():
    binary, library = built(TRT_VERSIONS[-1])
    args = ("fuzz", "--library", str(library), "--seed", "7", "--plugin", "Pool", "--iteration", "123")
    first, second = stress(binary, *args), stress(binary, *args)
    assert first.returncode == 0, explain(first)
    assert first.stdout == second.stdout
    assert "Pool seed=7 iteration=123:" in first.stdout  # the collection is printed for the report


def test_the_command_line_explains_mistakes():
    binary, library = built(TRT_VERSIONS[-1])
    for args, message in (
        ((), "missing subcommand"),
        (("shake", "--library", str(library)), "unknown subcommand"),
        (("fuzz",), "--library is required"),
        (("fuzz", "--library", str(library), "--iterations", "many"), "bad value 'many' for --iterations"),
        (("fuzz", "--library", str(library), "--cycles", "5"), "unknown option '--cycles' for fuzz"),
        (("fuzz", "--library", str(library), "--plugin", "Softmax"), "unknown plugin 'Softmax'"),
        (("fuzz", "--library", str(library), "--iteration", "3"), "--iteration needs --plugin"),
    ):
        result = stress(binary, *args)
        assert result.returncode == 2, explain(result)
        assert message in result.stderr and "usage: plugin_stress" in result.stderr, explain(result)
    missing = stress(binary, "fuzz", "--library", str(BUILD_DIR / "no_such_library.so"))
    assert missing.returncode == 2 and "FAIL fuzz :: dlopen" in missing.stdout, explain(missing)


def test_gpu_subcommands_run_or_say_they_need_a_gpu():
    binary, library = built(TRT_VERSIONS[-1])
    result = stress(binary, "lifecycle", "--library", str(library), "--cycles", "20", "--plugin", "LeakyReLU")
    if "no CUDA device" in result.stdout:
        assert result.returncode == 1, explain(result)
        assert "the lifecycle run needs a GPU (fuzz needs none)" in result.stdout
    else:  # on a GPU machine the short run must pass
        assert result.returncode == 0, explain(result)


@pytest.mark.parametrize("version", TRT_VERSIONS)
def test_the_usage_lists_the_plugins_of_the_specs(version):
    """Issue 40, item 10: the --plugin list was a hand-kept line (no SwiGLUSplit); now it is the specs'."""
    binary, _ = built(version)
    result = stress(binary)
    assert result.returncode == 2, explain(result)
    listed = re.search(r"^plugins: (.*)$", result.stderr, re.M)
    assert listed, explain(result)
    assert set(listed.group(1).split(", ")) == set(PLUGINS)
