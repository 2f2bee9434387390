"""README.md's quick start, run as a new user runs it : in a copy of the repository with no
../shared beside it (no TensorRT headers, no MNIST digits), on ports other than the defaults given only
through the environment variables every tool reads.

`make serve` starts the server from the copy; then every command of the README block "Then, in a second
terminal" runs verbatim; the commands that need ../shared must say what they need and how to provide it,
and the rest must work (the load test on the sample digits). The copy shares this checkout's .venv.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from trt_plugin_kit.interface import MNIST_DIR, REPO_ROOT
from trt_plugin_kit.models import mnist
from trt_plugin_kit.serving.host import free_port

ADMIN_KEY = "readme-test-key"


def _copy_checkout(target: Path) -> None:
    """The files a clone has (tracked, plus new files not ignored), with their times, and this .venv."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO_ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)  # times kept: make's .venv stamp stays newer
    (target / ".venv").symlink_to(REPO_ROOT / ".venv")
    # The shared .venv is this checkout's: make must not try to rebuild it through the link.
    installed = REPO_ROOT / ".venv" / ".installed"
    if installed.is_file():
        stamp = installed.stat().st_mtime - 1
        os.utime(target / "pyproject.toml", (stamp, stamp))


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    root = tmp_path_factory.mktemp("fresh")
    repo = root / "repo"
    repo.mkdir()
    _copy_checkout(repo)
    assert not (root / "shared").exists()
    return repo


@pytest.fixture(scope="module")
def ports():
    return {"http": free_port(), "grpc": free_port(), "metrics": free_port()}


def user_env(ports: dict[str, int], **extra: str) -> dict[str, str]:
    """A user's shell after `export TRITON_HTTP_PORT=... TRITON_GRPC_PORT=... TRITON_METRICS_PORT=...`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "LOADTEST_", "LOCUST_"))}
    env.pop("MNIST_DIR", None)
    env.pop("MAKEFLAGS", None)
    env |= {
        "TRITON_HTTP_PORT": str(ports["http"]),
        "TRITON_GRPC_PORT": str(ports["grpc"]),
        "TRITON_METRICS_PORT": str(ports["metrics"]),
    }
    return env | extra


def as_own_install(clone: Path, env: dict[str, str]) -> dict[str, str]:
    """The shared .venv's editable install points at this checkout: PYTHONPATH makes its console scripts
    (make serve, trt-plugin-kit-client) import the copy's code, as the copy's own install would."""
    return env | {"PYTHONPATH": str(clone)}


def run(clone: Path, command: str, env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", command],
        cwd=clone,
        env=as_own_install(clone, env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def served(clone, ports):
    """`make serve` in the copy, as the README's first command, with the admin key exported."""
    log = (clone / "serve.log").open("w")
    process = subprocess.Popen(
        ["make", "serve"],
        cwd=clone,
        env=as_own_install(clone, user_env(ports, TRITON_ADMIN_KEY=ADMIN_KEY)),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while "Triton Inference Server is ready." not in (clone / "serve.log").read_text():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"make serve did not come up:\n{(clone / 'serve.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)  # Ctrl-C, as the README says
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        log.close()


def readme_quick_start(clone: Path) -> list[tuple[str, str]]:
    """(command, its comment) for each line of the README block after "Then, in a second terminal:"."""
    text = (clone / "README.md").read_text()
    block = re.search(r"Then, in a second terminal:\n\n```bash\n(.*?)```", text, re.S)
    assert block, "README.md lost its quick start block"
    lines = []
    for line in block.group(1).splitlines():
        command, _, comment = line.partition("#")
        lines.append((command.strip(), comment.strip()))
    return lines


def test_the_readme_quick_start_works_on_other_ports_without_shared(clone, ports, served):
    commands = readme_quick_start(clone)
    assert [c for c, _ in commands][:2] == [
        ".venv/bin/trt-plugin-kit-client health",
        ".venv/bin/trt-plugin-kit-client infer samples/digits/*.png --top-k 3",
    ]
    env = user_env(ports)
    seen = set()
    for command, comment in commands:
        result = run(clone, command, env)
        explain = f"$ {command}\nexit {result.returncode}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
        if "-client health" in command:
            assert result.returncode == 0, explain
            assert f"at 127.0.0.1:{ports['grpc']} over gRPC: live, ready" in result.stdout, explain
            assert result.stdout.splitlines()[-1] == "health: OK"
        elif "-client infer samples/digits/" in command:
            assert result.returncode == 0, explain
            lines = result.stdout.splitlines()
            assert len(lines) == 10 and all(
                line.startswith(f"samples/digits/{d}.png: {d} (") for d, line in enumerate(lines)
            ), explain
        elif "-client eval" in command:
            # No ../shared: eval names what it needs, where it looked and how to point elsewhere.
            assert result.returncode == 7, explain
            missing = clone.parent / "shared" / "data" / "mnist"
            assert f"MNIST digits not found: {missing} (the default folder) has no" in result.stderr
            assert "Point --mnist-dir DIR or $MNIST_DIR at a folder holding" in result.stderr
            assert "`eval` needs them and stops here (nothing was sent)" in result.stderr
            # With the digits named by the variable alone, the README's figure comes out.
            with_data = run(clone, command, env | {"MNIST_DIR": str(MNIST_DIR)})
            assert with_data.returncode == 0, with_data.stderr
            expected = re.search(r"accuracy: (\d\.\d{4})", comment).group(1)
            assert with_data.stdout.splitlines()[-1] == f"accuracy: {expected}" == "accuracy: 0.9890"
            assert with_data.stdout.splitlines()[-2].startswith("split: validation")
            assert f"127.0.0.1:{ports['http']} over HTTP" in with_data.stdout
        elif command.startswith("make loadtest"):
            assert result.returncode == 0, explain
            assert "note: no MNIST data set: MNIST digits not found" in result.stderr, explain
            assert "Sending the 10 sample digits of" in result.stderr
            assert f"HTTP 127.0.0.1:{ports['http']} / gRPC 127.0.0.1:{ports['grpc']}" in result.stderr
            assert "PASSED: reports in" in result.stdout
        else:
            assert result.returncode == 0, explain
        seen.add(command.split()[0] if command.startswith("make") else command.split()[1])
    assert seen == {"health", "infer", "eval", "make"}


def test_shared_memory_with_and_without_the_admin_key(clone, ports, served):
    command = ".venv/bin/python -m clients infer samples/digits/3.png --shared-memory system"
    with_key = run(clone, command, user_env(ports, TRITON_ADMIN_KEY=ADMIN_KEY))
    assert with_key.returncode == 0 and with_key.stdout.startswith("samples/digits/3.png: 3 ("), (
        with_key.stderr
    )
    without = run(clone, command, user_env(ports))
    assert without.returncode == 8, without.stderr
    assert "Give the key the server was started with: --admin-key KEY or $TRITON_ADMIN_KEY" in without.stderr
    assert "restart it as `TRITON_ADMIN_KEY=<secret> make serve`" in without.stderr


def test_make_plugins_says_which_headers_it_needs(clone, ports):
    result = run(clone, "make plugins", user_env(ports), timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    header = "../shared/vendor/tensorrt/10.13.3/include/NvInferRuntime.h"
    assert f"error: TensorRT 10.13.3 headers not found: {header} is missing" in result.stderr
    assert "make plugins TRT_VENDOR_DIR=DIR" in result.stderr and "TRT_INCLUDE_DIR=" in result.stderr
    assert not (clone / "build" / "trt-10.13.3").exists()  # stopped before CMake
    # A TensorRT install's headers: one build named after their version.
    install = REPO_ROOT.parent / "shared" / "vendor" / "tensorrt" / "11.1" / "include"
    if not install.is_dir():
        pytest.skip("no TensorRT headers on this machine to stand in for an install")
    dry = run(clone, f"make -n plugins TRT_INCLUDE_DIR={install}", user_env(ports), timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert f"-DTENSORRT_INCLUDE_DIR={install} " in dry.stdout and "for v in 11.1.0; do" in dry.stdout


def test_the_mnist_data_message_names_the_variable_too(clone, ports):
    """$MNIST_DIR set to a folder without the digits: the message says the folder came from the variable."""
    empty = clone / "no-digits"
    empty.mkdir(exist_ok=True)
    result = run(clone, ".venv/bin/python -m clients eval", user_env(ports, MNIST_DIR=str(empty)))
    assert result.returncode == 7
    assert f"MNIST digits not found: {empty} ($MNIST_DIR) has no {mnist.DEV_IMAGES_FILE}" in result.stderr
