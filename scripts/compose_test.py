#!/usr/bin/env python3
"""`make compose-test`: the compose profiles `cpu` and `loadtest` for real, on this machine's Docker engine.

    .venv/bin/python scripts/compose_test.py [--budget 1800] [--prepare-only]

Steps, each timed, all within --budget seconds:
  1. base image: $PYTHON_IMAGE, else python:3.11-slim when present or pullable, else a Debian image made once
     with mmdebstrap or debootstrap (trt-plugin-kit/python:3.11-bookworm) and reused
  2. wheelhouse: docker/wheelhouse/, `pip wheel` of the project's requirements at the versions of .venv;
     reused while requirements and versions are unchanged
  3. build the images with no network at all (wheels only)
  4. `up --wait` triton-cpu: host networking, Triton on 127.0.0.1, free ports (test traffic stays on loopback)
  5. the container: unprivileged user, read-only model repository
  6. the clients from .venv: health (HTTP and gRPC), infer on samples/digits, eval on held-out MNIST digits
  7. the loadtest service: a short headless Locust run, 0 failures
  8. restart policy: serve.py killed inside the container, the container must come back healthy
  9. failover: triton-cpu scaled to 3 replicas behind HAProxy, the Locust mix through it, one replica
     killed in the middle (loadtests/studies/failover.py): no failure after the clients' retries, the dead
     replica out of rotation within the health checks' bound, every replica served, the returning one too
 10. Triton's log: no error but the two that every CPU-only start prints
Always, even on failure or Ctrl-C: `down -v`, then a check that no container, network or volume is left.
Reports (logs, eval, load test, summary.md) go to reports/compose-test-<UTC time>/. Exit status 0 or 1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import tomllib

from loadtests import report
from loadtests.studies.failover import REPLICAS, FailoverFailed, run_failover
from trt_plugin_kit.deploy import compose, debian_root
from trt_plugin_kit.deploy.wheelhouse import WHEELHOUSE, stale_wheels
from trt_plugin_kit.interface import REPO_ROOT, SAMPLES_DIR
from trt_plugin_kit.models.mnist import DEFAULT_DATA_DIR, DEV_IMAGES_FILE
from trt_plugin_kit.serving.edge.native_front import BINARY_NAME, DEFAULT_BINARY
from trt_plugin_kit.serving.host import free_port
from trt_plugin_kit.serving.server import EXPECTED_CPU_ERROR_LINES

# Never the user's own project (`down -v` removes its volumes), and one per run: two runs on one Docker daemon
# (two checkouts, CI beside a developer) must not take each other's containers down.
PROJECT = f"trt_plugin_kit_compose_test_{os.getpid()}"
COMPOSE_FILES = ("docker-compose.yml", "docker/compose.host-network.yml")
REPLICAS_FILE = "docker/compose.replicas.yml"
SERVICE = "triton-cpu"
PUBLIC_PYTHON_IMAGE = "python:3.11-slim"
LOCAL_PYTHON_IMAGE = "trt-plugin-kit/python:3.11-bookworm"
DEBIAN_SUITE = "bookworm"
DEBIAN_PACKAGES = "python3,python3-venv,libpython3.11,ca-certificates"
OFFLINE_PIP_OPTIONS = "--no-index --find-links=/wheelhouse"
LOADTEST_ENV = {
    "LOADTEST_USERS": "4",
    "LOADTEST_RUN_TIME": "20s",
    # Paced (60 requests/s in all): the service's path is what is checked here, not the cores' limit, and
    # make test runs this beside pytest on the same cores.
    "LOADTEST_USER_RATE": "15",
    "LOADTEST_MAX_FAILURE_RATIO": "0",
    "LOADTEST_MAX_P99_MS": "1000",
}
EVAL_DIGITS = 300  # held-out (validation split) digits sent through mnist_pipeline
MIN_ACCURACY = 0.95
ERROR_LINE = re.compile(r"^E\d{4} |Traceback \(most recent call last\)|serve\.py: error|tritonserver exited")


STEPS = (
    "base image", "wheelhouse", "build images (offline)", f"up --wait {SERVICE}",
    "container user and read-only repository", "clients: health, infer, eval", "loadtest service",
    "restart policy", "failover", "logs",
)  # fmt: skip


class CheckFailed(Exception):
    """A step found something wrong; the message says what."""


class Runner:
    """Runs commands under the overall budget, with each step's name and duration printed and recorded."""

    def __init__(self, budget_s: float, run_dir: Path):
        self.deadline = time.monotonic() + budget_s
        self.run_dir = run_dir
        self.timings: list[tuple[str, float, str]] = []

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, command: list[str], *, env=None, log: Path | None = None, check=True, timeout=None, **kw):
        """Runs a command (output to the console, or to `log`); raises CheckFailed on failure or time-out."""
        limit = min(timeout or self.remaining(), self.remaining())
        if limit <= 0:
            raise CheckFailed(f"time budget spent before `{' '.join(command[:4])} ...`")
        try:
            if log is None:
                result = subprocess.run(command, env=env, timeout=limit, check=False, **kw)
            else:
                with log.open("w") as handle:
                    result = subprocess.run(
                        command, env=env, timeout=limit, stdout=handle, stderr=subprocess.STDOUT, check=False
                    )
        except subprocess.TimeoutExpired:
            raise CheckFailed(f"`{' '.join(command[:6])} ...` did not finish within {limit:.0f} s") from None
        if check and result.returncode != 0:
            where = f"; output in {log}" if log else ""
            raise CheckFailed(f"`{' '.join(command[:8])} ...` exited with {result.returncode}{where}")
        return result

    def output(self, command: list[str], **kw) -> str:
        return self.run(command, capture_output=True, text=True, **kw).stdout.strip()

    def step(self, name: str):
        return _Step(self, name)


class _Step:
    def __init__(self, runner: Runner, name: str):
        self.runner, self.name = runner, name

    def __enter__(self):
        self.start = time.monotonic()
        print(f"\n== compose-test: {self.name}", flush=True)
        return self

    def __exit__(self, kind, error, _traceback):
        elapsed = time.monotonic() - self.start
        status = "ok" if kind is None else "FAILED"
        self.runner.timings.append((self.name, elapsed, status))
        print(f"-- {self.name}: {status} in {elapsed:.1f} s", flush=True)
        return False


# ---------------------------------------------------------------------------------------------------
# Set-up: compose binary, base image, wheelhouse


def compose_binary() -> list[str]:
    try:
        return compose.compose_binary()
    except compose.ComposeNotFound as error:
        raise CheckFailed(str(error)) from None


def image_present(runner: Runner, image: str) -> bool:
    return runner.run(["docker", "image", "inspect", image], capture_output=True, check=False).returncode == 0


def python_version_in(runner: Runner, image: str) -> str:
    code = "import sys; print('%d.%d' % sys.version_info[:2])"
    return runner.output(["docker", "run", "--rm", "--network", "none", image, "python3", "-c", code])


def build_local_python_image(runner: Runner) -> None:
    """Debian's python3 (and its libpython) as a base image, from Debian's own packages: no registry."""
    if os.geteuid() != 0 or debian_root.tool() is None:
        raise CheckFailed(
            f"{PUBLIC_PYTHON_IMAGE} cannot be pulled and {LOCAL_PYTHON_IMAGE} cannot be made here: that "
            f"needs root and mmdebstrap or debootstrap ({debian_root.INSTALL_HINT}). Or set PYTHON_IMAGE to "
            "a local image with python3.11 and its venv module."
        )
    root = Path(tempfile.mkdtemp(prefix="compose-test-rootfs-", dir=REPO_ROOT / "build"))
    try:
        command = debian_root.command(DEBIAN_SUITE, DEBIAN_PACKAGES, root)
        print(f"{command[0]} {DEBIAN_SUITE} ({DEBIAN_PACKAGES}) from {command[-1]}, a minute ...", flush=True)
        runner.run(command, log=runner.run_dir / "debian-root.log", timeout=900)
        debian_root.clear_apt_caches(root)
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        runner.run(
            ["docker", "import", "--change", 'CMD ["python3"]', "-", LOCAL_PYTHON_IMAGE],
            stdin=tar.stdout,
            capture_output=True,
            timeout=300,
        )
        if tar.wait() != 0:
            raise CheckFailed(f"tar of the {command[0]} tree failed")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def choose_python_image(runner: Runner) -> str:
    if os.environ.get("PYTHON_IMAGE"):
        image = os.environ["PYTHON_IMAGE"]
        if not image_present(runner, image):
            runner.run(["docker", "pull", image], timeout=600)
        return image
    if image_present(runner, PUBLIC_PYTHON_IMAGE):
        return PUBLIC_PYTHON_IMAGE
    pulled = runner.run(
        ["docker", "pull", PUBLIC_PYTHON_IMAGE], capture_output=True, check=False, timeout=120
    )
    if pulled.returncode == 0:
        return PUBLIC_PYTHON_IMAGE
    print(f"{PUBLIC_PYTHON_IMAGE} cannot be pulled (no registry): using {LOCAL_PYTHON_IMAGE}", flush=True)
    if image_present(runner, LOCAL_PYTHON_IMAGE):
        print(f"{LOCAL_PYTHON_IMAGE} is present: reused", flush=True)
    else:
        build_local_python_image(runner)
    return LOCAL_PYTHON_IMAGE


def image_requirements() -> list[str]:
    """What docker/python.Dockerfile installs: its installer (uv), build backend, dependencies, the serve and
    load extras."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    return [
        "uv",
        *project["build-system"]["requires"],
        *project["project"]["dependencies"],
        *extras["serve"],
        *extras["load"],
    ]


def build_wheelhouse(runner: Runner) -> None:
    """Wheels for the images at the versions installed in this environment (tested here), for this Python."""
    freeze = runner.output([sys.executable, "-m", "pip", "freeze", "--exclude-editable"])
    constraints = "\n".join(line for line in freeze.splitlines() if "==" in line and " @ " not in line)
    requirements = "\n".join(image_requirements())
    python_tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    key = hashlib.sha256(f"{python_tag}\n{requirements}\n{constraints}".encode()).hexdigest()
    stamp = WHEELHOUSE / ".stamp"
    recorded = stamp.read_text().split() if stamp.is_file() else []
    if recorded[:1] == [key]:
        print(f"{WHEELHOUSE} up to date ({len(list(WHEELHOUSE.glob('*.whl')))} wheels): reused", flush=True)
        return
    for name in stale_wheels(recorded, [wheel.name for wheel in WHEELHOUSE.glob("*.whl")]):
        (WHEELHOUSE / name).unlink(missing_ok=True)
    stamp.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "requirements.txt").write_text(requirements + "\n")
        (Path(scratch) / "constraints.txt").write_text(constraints + "\n")
        print(f"pip wheel ({len(image_requirements())} requirements, .venv's versions) into {WHEELHOUSE}")
        # Made aside, then moved in: the stamp names exactly this step's wheels, whatever else lands there.
        made_dir = Path(scratch) / "wheels"
        runner.run(
            [sys.executable, "-m", "pip", "wheel", "--progress-bar", "off", "--wheel-dir", str(made_dir),
             "-r", f"{scratch}/requirements.txt", "-c", f"{scratch}/constraints.txt"],
            log=runner.run_dir / "wheelhouse.log",
            timeout=900,
        )  # fmt: skip
        made = sorted(wheel.name for wheel in made_dir.glob("*.whl"))
        WHEELHOUSE.mkdir(parents=True, exist_ok=True)
        for name in made:
            shutil.move(made_dir / name, WHEELHOUSE / name)
    stamp.write_text("\n".join([key, *made]) + "\n")
    print(f"{len(list(WHEELHOUSE.glob('*.whl')))} wheels", flush=True)


def stage_edge_binary(runner: Runner) -> None:
    """The edge's compiled gRPC front, as `make edge-native` builds it here, for the image (which cannot build
    it with no network): docker/wheelhouse/edge-native/ (docker/python.Dockerfile, stage edge-native)."""
    runner.run(
        ["make", "--no-print-directory", "edge-native"], log=runner.run_dir / "edge-native.log", timeout=600
    )
    if not DEFAULT_BINARY.is_file():
        raise CheckFailed(
            f"make edge-native built no {DEFAULT_BINARY} (libnghttp2-dev, libssl-dev, zlib1g-dev?)"
        )
    staged = WHEELHOUSE / "edge-native" / BINARY_NAME
    staged.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(DEFAULT_BINARY, staged)
    print(f"the edge's compiled gRPC front staged in {staged.parent}", flush=True)


# ---------------------------------------------------------------------------------------------------
# The checks


def client(runner: Runner, *args: str, log: Path | None = None, **kw):
    return runner.run([sys.executable, "-m", "clients", *args], log=log, timeout=300, **kw)


def check_container(runner: Runner, compose: list[str]) -> None:
    uid = runner.output([*compose, "exec", "-T", SERVICE, "id", "-u"])
    if uid == "0":
        raise CheckFailed(f"{SERVICE} runs as root")
    probe = "open('/opt/trt_plugin_kit/model_repository/write-probe', 'w')"
    attempt = runner.run(
        [*compose, "exec", "-T", SERVICE, "python", "-c", probe], capture_output=True, text=True, check=False
    )
    if attempt.returncode == 0 or "Read-only file system" not in attempt.stderr:
        raise CheckFailed(f"the model repository is writable in {SERVICE}: {attempt.stderr.strip()}")
    print(f"{SERVICE} runs as uid {uid}; its model repository is read-only")


def check_clients(runner: Runner, ports: dict[str, int]) -> dict:
    http, grpc = f"127.0.0.1:{ports['http']}", f"127.0.0.1:{ports['grpc']}"
    client(runner, "health", "--protocol", "http", "--url", http, log=runner.run_dir / "health-http.log")
    client(runner, "health", "--protocol", "grpc", "--url", grpc, log=runner.run_dir / "health-grpc.log")
    print(f"health: every model ready over HTTP ({http}) and gRPC ({grpc})")

    samples = sorted(SAMPLES_DIR.glob("*.png"))
    answer = client(
        runner, "infer", "--protocol", "grpc", "--url", grpc, "--top-k", "1", "--json", *map(str, samples),
        capture_output=True, text=True,
    )  # fmt: skip
    results = json.loads(answer.stdout)["results"]
    predicted = {Path(r["input"]).stem: str(r["top_k"][0]["index"]) for r in results}
    wrong = {name: label for name, label in predicted.items() if name != label}
    if len(predicted) != len(samples) or wrong:
        answered = f"{len(predicted)}/{len(samples)} answered"
        raise CheckFailed(f"infer on samples/digits: {answered}, wrong (file: class): {wrong}")
    print(f"infer: {len(samples)} sample digits, each classified as its file name says")

    figures = {"samples": len(samples)}
    if not (DEFAULT_DATA_DIR / DEV_IMAGES_FILE).is_file():
        print(f"eval skipped: no MNIST set in {DEFAULT_DATA_DIR}")
        return figures
    eval_report = runner.run_dir / "eval.json"
    client(
        runner, "eval", "--protocol", "http", "--url", http, "--split", "validation",
        "--limit", str(EVAL_DIGITS), "--min-accuracy", str(MIN_ACCURACY), "--no-progress",
        "--report", str(eval_report),
        log=runner.run_dir / "eval.log",
    )  # fmt: skip
    print((runner.run_dir / "eval.log").read_text().strip().splitlines()[-1])
    figures["eval"] = json.loads(eval_report.read_text())
    return figures


def run_loadtest(runner: Runner, compose: list[str], env: dict[str, str]) -> report.RunSummary:
    log = runner.run_dir / "loadtest.log"
    result = runner.run(
        [*compose, "--profile", "loadtest", "run", "--rm", "-T", "loadtest"],
        env=env, log=log, check=False, timeout=300,
    )  # fmt: skip
    lines = log.read_text(errors="replace").replace("\r", "\n").splitlines()
    print("\n".join(line for line in lines if " req " in line or "PASSED" in line or "FAILED" in line))
    summary_file = Path(env["LOADTEST_REPORTS_HOST_DIR"]) / "summary.json"
    if result.returncode != 0 or not summary_file.is_file():
        raise CheckFailed(f"the loadtest service exited with {result.returncode}; see {log}")
    summary = report.load_summary(summary_file)
    if not summary.passed or summary.total.failures or not summary.total.requests:
        raise CheckFailed(f"load test: {summary.total.failures} failures, violations {summary.violations}")
    return summary


def container_state(runner: Runner, compose: list[str]) -> tuple[str, int, str]:
    container = runner.output([*compose, "ps", "-q", SERVICE])
    state = runner.output(
        ["docker", "inspect", "-f", "{{.State.Status}} {{.RestartCount}} {{.State.Health.Status}}", container]
    ).split()
    return state[0], int(state[1]), state[2]


def check_restart(runner: Runner, compose: list[str], ports: dict[str, int]) -> float:
    """serve.py killed (SIGKILL from inside: an abnormal exit, not a `docker stop`) must come back."""
    _, restarts_before, _ = container_state(runner, compose)
    kill = (
        "import os, signal\n"
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    if b'trt-plugin-kit\\0serve' in open(f'/proc/{pid}/cmdline', 'rb').read():\n"
        "        os.kill(int(pid), signal.SIGKILL)\n"
    )
    killed_at = time.monotonic()
    runner.run([*compose, "exec", "-T", SERVICE, "python", "-c", kill], capture_output=True, check=False)
    while time.monotonic() - killed_at < 180:
        status, restarts, health = container_state(runner, compose)
        if restarts > restarts_before and health == "healthy":
            back_after = time.monotonic() - killed_at
            client(runner, "health", "--protocol", "http", "--url", f"127.0.0.1:{ports['http']}",
                   log=runner.run_dir / "health-after-restart.log")  # fmt: skip
            print(f"restart policy: serve.py killed, {SERVICE} healthy again after {back_after:.1f} s")
            return back_after
        time.sleep(1)
    raise CheckFailed(f"{SERVICE} not healthy again 180 s after serve.py was killed ({status}, {health})")


def check_logs(runner: Runner, compose: list[str]) -> None:
    log = runner.run_dir / f"{SERVICE}.log"
    runner.run([*compose, "logs", "--no-color", "--no-log-prefix", SERVICE], log=log)
    lines = log.read_text(errors="replace").splitlines()
    errors = [
        line
        for line in lines
        if ERROR_LINE.search(line) and not any(known in line for known in EXPECTED_CPU_ERROR_LINES)
    ]
    if errors:
        raise CheckFailed(f"errors in {SERVICE}'s log ({log}):\n" + "\n".join(errors[:20]))
    if any("native gRPC front is not built" in line for line in lines):
        raise CheckFailed(f"{SERVICE} serves gRPC from the Python front: its image lacks the compiled one")
    starts = sum("Triton Inference Server is ready." in line for line in lines)
    print(f"{SERVICE}'s log: {len(lines)} lines, {starts} ready starts, no error but the known CPU-only ones")


# ---------------------------------------------------------------------------------------------------


def tear_down(compose: list[str], env: dict[str, str]) -> list[str]:
    """`down -v` whatever happened, then what of the project is still there (should be nothing)."""
    print("\n== compose-test: down -v", flush=True)
    subprocess.run(
        # --rmi local: this run's images (named after the per-run project) go too; the build cache stays.
        [*compose, "--profile", "loadtest", "down", "-v", "--rmi", "local", "--remove-orphans",
         "--timeout", "30"],
        env=env, timeout=180, check=False,
    )  # fmt: skip
    label = f"label=com.docker.compose.project={PROJECT}"
    left = []
    for kind in ("container", "network", "volume"):
        listing = ["docker", kind, "ls", "-q", "--filter", label] + (["--all"] if kind == "container" else [])
        names = subprocess.run(listing, capture_output=True, text=True, check=False).stdout.split()
        left += [f"{kind} {name}" for name in names]
    return left


def print_failover(figures: dict) -> None:
    print(
        f"failover: {figures['replicas']} replicas, {figures['users']} users, {figures['run_s']} s, "
        f"{figures['killed']}: {figures['requests']} requests, {figures['failures']} failed, "
        f"{figures['retries']} retried; out of rotation after {figures['out_of_rotation_after_s']} s "
        f"(bound {figures['detection_bound_s']} s), back after {figures['back_in_rotation_after_s']} s; "
        f"served per replica {figures['served_per_replica']}"
    )


def write_summary(runner: Runner, run_dir: Path, figures: dict, passed: bool) -> None:
    total = sum(seconds for _, seconds, _ in runner.timings)
    lines = [f"# compose test {'PASSED' if passed else 'FAILED'} in {total:.0f} s", "", "| step | s | |",
             "|---|---:|---|"]  # fmt: skip
    lines += [f"| {name} | {seconds:.1f} | {status} |" for name, seconds, status in runner.timings]
    summary = figures.get("loadtest")
    if summary is not None:
        run = summary.run
        lines += ["", f"Load test: {run['users']} users, {run['run_time']}, the loadtest service", ""]
        lines += report.stats_table([*summary.request_types, summary.total])
    failover = figures.get("failover")
    if failover is not None:
        lines += ["", f"Failover ({REPLICAS} replicas behind HAProxy, one killed):", "", "```"]
        lines += [json.dumps(failover, indent=2), "```"]
    (run_dir / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n" + "\n".join(lines) + f"\n\nreports: {run_dir}")


def _interrupt(signum, _frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


def set_up(runner: Runner, env: dict) -> list[str]:
    """Steps 1-3 (base image, wheelhouse, images); returns the compose command line."""
    with runner.step("base image"):
        compose = [*compose_binary(), "-p", PROJECT, "--project-directory", str(REPO_ROOT)]
        for file in COMPOSE_FILES:
            compose += ["-f", str(REPO_ROOT / file)]
        compose += ["--profile", "cpu"]
        print(runner.output([*compose, "version"]), flush=True)
        env["PYTHON_IMAGE"] = image = choose_python_image(runner)
        version = python_version_in(runner, image)
        here = f"{sys.version_info.major}.{sys.version_info.minor}"
        if version != here:
            raise CheckFailed(f"{image} has Python {version}, the wheelhouse is made by Python {here}")
    with runner.step("wheelhouse"):
        build_wheelhouse(runner)
        stage_edge_binary(runner)
    with runner.step("build images (offline)"):
        runner.run([*compose, "--profile", "loadtest", "build"], env=env, log=runner.run_dir / "build.log")
    return compose


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=1800, help="seconds for the whole test (1800)")
    parser.add_argument(
        "--prepare-only",
        action="store_true",
        help="steps 1-3 only (base image, wheelhouse, images), which a later run reuses: make test runs them "
        "beside its builds, since they mostly wait on downloads",
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # CI's time-out: still tear down

    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    run_dir = REPO_ROOT / "reports" / f"compose-test-{stamp}"
    run_dir.mkdir(parents=True)
    (REPO_ROOT / "build").mkdir(exist_ok=True)
    runner = Runner(args.budget, run_dir)
    ports = {"http": free_port(), "grpc": free_port(), "metrics": free_port()}
    env = dict(os.environ)
    env.pop("COMPOSE_PROFILES", None)
    env.update(
        PIP_INSTALL_OPTIONS=OFFLINE_PIP_OPTIONS,
        TRITON_HTTP_PORT=str(ports["http"]),
        TRITON_GRPC_PORT=str(ports["grpc"]),
        TRITON_METRICS_PORT=str(ports["metrics"]),
        LOADTEST_REPORTS_HOST_DIR=str(run_dir / "loadtest"),
        **LOADTEST_ENV,
    )
    compose: list[str] = []
    figures: dict = {}
    passed = False
    if args.prepare_only:
        try:
            set_up(runner, env)
        except CheckFailed as failure:
            print(f"compose-test --prepare-only: FAILED: {failure}", file=sys.stderr)
            return 1
        print("compose-test --prepare-only: base image, wheelhouse and images ready")
        return 0
    try:
        compose = set_up(runner, env)
        with runner.step(f"up --wait {SERVICE}"):
            up = [*compose, "up", "-d", "--wait", "--wait-timeout", "300", SERVICE]
            runner.run(up, env=env, timeout=400)
        with runner.step("container user and read-only repository"):
            check_container(runner, compose)
        with runner.step("clients: health, infer, eval"):
            figures.update(check_clients(runner, ports))
        with runner.step("loadtest service"):
            figures["loadtest"] = run_loadtest(runner, compose, env)
        with runner.step("restart policy"):
            figures["restart_s"] = check_restart(runner, compose, ports)
        with runner.step("failover"):
            try:
                figures["failover"] = run_failover(
                    [*compose, "-f", str(REPO_ROOT / REPLICAS_FILE)], env, run_dir / "failover"
                )
            except FailoverFailed as failure:
                raise CheckFailed(f"failover: {failure}") from None
            print_failover(figures["failover"])
        with runner.step("logs"):
            check_logs(runner, compose)
        passed = True
    except CheckFailed as failure:
        print(f"\ncompose-test: FAILED: {failure}", file=sys.stderr)
    except KeyboardInterrupt:
        print("\ncompose-test: interrupted", file=sys.stderr)
    finally:
        if compose:
            start = time.monotonic()
            left = tear_down([*compose, "-f", str(REPO_ROOT / REPLICAS_FILE)], env)
            runner.timings.append(("down -v", time.monotonic() - start, "ok" if not left else "FAILED"))
            if left:
                print(f"compose-test: FAILED: left behind: {', '.join(left)}", file=sys.stderr)
                passed = False
        write_summary(runner, run_dir, figures, passed)
    counts = [sum(status == wanted for *_, status in runner.timings) for wanted in ("ok", "FAILED")]
    skipped = len(STEPS) - sum(counts) + 1  # + `down -v`, which always runs
    # The plain closing line CI runners read: N passed, N failed[, N skipped].
    closing = f"compose-test: {counts[0]} passed, {counts[1]} failed"
    print(closing + (f", {skipped} skipped" if skipped else ""))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
