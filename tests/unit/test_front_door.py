"""One front door: `trt-plugin-kit COMMAND` (python -m trt_plugin_kit COMMAND) reaches every kit command,
and the console scripts pyproject.toml declares point at functions that exist."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys

import pytest

from trt_plugin_kit.__main__ import COMMANDS
from trt_plugin_kit.interface import REPO_ROOT


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)


def test_the_front_door_lists_every_command():
    result = run("-m", "trt_plugin_kit", "--help")
    assert result.returncode == 0
    for command in COMMANDS:
        assert f"  {command} " in result.stdout
    assert run("-m", "trt_plugin_kit", "no-such-command").returncode == 2


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_has_a_main_and_help(command):
    module = importlib.import_module(COMMANDS[command][0])
    assert callable(module.main)
    if command in ("bench", "build-engines"):  # their --help is tested with their own tools
        return
    result = run("-m", "trt_plugin_kit", command, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


def test_a_command_runs_through_the_front_door():
    result = run("-m", "trt_plugin_kit", "specs", "list")
    assert result.returncode == 0 and "L2Normalize" in result.stdout


def test_the_console_scripts_point_at_functions():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == {"trt-plugin-kit", "trt-plugin-kit-client", "trt-plugin-kit-loadtest"}
    for target in scripts.values():
        module, _, function = target.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), target


# The server's retired entry points: `make serve` and `trt-plugin-kit serve` (`python -m trt_plugin_kit serve`
# in an image without the console script) are the one way to start it.
RETIRED_SERVE_COMMANDS = re.compile(
    r"scripts/serve\.py|trt_plugin_kit/serve\.py|-m trt_plugin_kit\.serving\b(?!\.)"
)


def test_one_way_to_serve():
    assert not (REPO_ROOT / "scripts" / "serve.py").exists()
    assert importlib.util.find_spec("trt_plugin_kit.serve") is None
    assert importlib.util.find_spec("trt_plugin_kit.serving.__main__") is None
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        capture_output=True, text=True, cwd=REPO_ROOT, check=True,
    ).stdout.split()  # fmt: skip
    quoting = [
        f"{path}: {found[0]}"
        for path in tracked
        if not path.startswith(("records/", "tests/")) and (REPO_ROOT / path).is_file()
        for found in RETIRED_SERVE_COMMANDS.finditer((REPO_ROOT / path).read_text(errors="replace"))
    ]
    assert not quoting, f"files still naming a retired way to serve: {quoting}"
