"""`--range -1:1` and `--model-range -1:1` as a user types them (issue 40, item 8): argparse before Python
3.13 read the value as a flag ("expected one argument"); only `--range=-1:1` worked."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trt_plugin_kit.interface import REPO_ROOT
from trt_plugin_kit.tritonserver.options import join_negative_values


def test_a_negative_range_is_joined_to_its_flag_and_nothing_else_is():
    assert join_negative_values(["--range", "-1:1", "--model-range", "-2.5:0"]) == [
        "--range=-1:1",
        "--model-range=-2.5:0",
    ]
    # A flag after --range stays a flag, a value without "-" stays apart, and nothing changes after "--".
    assert join_negative_values(["--range", "--verbose"]) == ["--range", "--verbose"]
    assert join_negative_values(["--range", "0:1"]) == ["--range", "0:1"]
    assert join_negative_values(["--", "--range", "-1:1"]) == ["--", "--range", "-1:1"]


@pytest.mark.parametrize(
    "command",
    [
        ["clients", "tensor", "--range", "-1:1", "--help"],
        ["loadtests", "--model-range", "-1:1", "--help"],
        ["loadtests.perf", "--model-range", "-1:1", "--help"],
    ],
    ids=["clients tensor --range", "loadtests --model-range", "perf --model-range"],
)
def test_every_tool_takes_a_negative_range_after_a_space(command):
    result = subprocess.run(
        [sys.executable, "-m", *command], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "expected one argument" not in result.stderr
