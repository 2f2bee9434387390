"""scripts/test_schedule.sh, the one home of make test's and make pytest's steps, run with a stand-in for make
that records what it was asked: both run the same test steps, each step lands in build/test-schedule.log with
its status, the plugin builds run at the lower priority, and the status is the first failing chain's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from trt_plugin_kit.interface import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "test_schedule.sh"


def run_schedule(tmp_path: Path, mode: str, failing: str = "") -> tuple[int, list[str], str]:
    """Runs the schedule with a make that logs its niceness and arguments, failing `failing`'s targets."""
    calls = tmp_path / "calls"
    fake_make = tmp_path / "make"
    fake_make.write_text(
        "#!/bin/bash\n"
        f'echo "$(nice) $*" >> {calls}\n'
        f'for target in {failing}; do [[ " $* " == *" $target "* ]] && exit 4; done\n'
        "exit 0\n"
    )
    fake_make.chmod(0o755)
    # A docker whose daemon never answers: the schedule must say why it skips the compose test, and go on.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "docker").chmod(0o755)
    build = tmp_path / "build"
    env = {**os.environ, "MAKE": str(fake_make), "BUILD_DIR": str(build), "PATH": f"{bin_dir}:/usr/bin:/bin"}
    done = subprocess.run(["bash", str(SCRIPT), mode], env=env, capture_output=True, text=True, timeout=60)
    assert "Traceback" not in done.stderr
    if mode == "test" and "test-prepare" not in failing:
        assert "compose-test skipped: no Docker daemon answers" in done.stdout
    return done.returncode, calls.read_text().splitlines(), (build / "test-schedule.log").read_text()


def targets(calls: list[str]) -> list[str]:
    """The make targets of each call, without its niceness, options and variables."""

    def plain(word: str) -> bool:
        return not word.startswith("-") and "=" not in word and not word.isdigit()

    return [" ".join(filter(plain, call.split()[1:])) for call in calls]


def test_make_test_and_make_pytest_run_the_same_test_steps(tmp_path):
    status, calls, log = run_schedule(tmp_path, "test")
    assert status == 0, log
    assert "compose-test" not in targets(calls), "no Docker daemon: the compose test is skipped"
    assert sorted(targets(calls)) == sorted(
        ["test-prepare", "pytest-unbuilt", "harness-check", "pytest-library", "numeric-threads"]
    )
    for step in ("prepare", "front", "plugin-builds", "pytest-library", "numeric-threads"):
        assert any(line.startswith(step + " ") and line.endswith("status 0") for line in log.splitlines()), (
            log
        )
    builds = next(call for call in calls if "harness-check" in call)
    assert builds.split()[0] == "5", f"the plugin builds run at niceness 5: {builds}"

    (tmp_path / "pytest").mkdir()
    status, pytest_calls, _ = run_schedule(tmp_path / "pytest", "pytest")
    assert status == 0
    assert targets(pytest_calls)[1:] == ["pytest-unbuilt", "harness-check", "pytest-library"]
    tiers = {"pytest-unbuilt", "harness-check", "pytest-library"}
    assert tiers <= set(targets(calls)), "make test runs every step make pytest runs"


@pytest.mark.parametrize(
    ("failing", "expected"), [("pytest-unbuilt", 4), ("pytest-library", 4), ("numeric-threads", 4), ("", 0)]
)
def test_the_status_is_a_failing_steps(tmp_path, failing, expected):
    status, _, log = run_schedule(tmp_path, "test", failing)
    assert status == expected, log
    if failing:
        assert any(line.endswith("status 4") for line in log.splitlines()), log


def test_a_failing_set_up_stops_the_schedule(tmp_path):
    status, calls, _ = run_schedule(tmp_path, "test", "test-prepare")
    assert status == 4
    assert targets(calls) == ["test-prepare"]


def test_an_unknown_mode_is_refused():
    done = subprocess.run(["bash", str(SCRIPT), "all"], capture_output=True, text=True, timeout=10)
    assert done.returncode == 2 and "usage: scripts/test_schedule.sh test|pytest" in done.stderr
