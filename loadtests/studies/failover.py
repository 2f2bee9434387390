"""Replicas behind a balancer, one killed under load: the failover scenario of `make compose-test`.

N replicas of the compose CPU profile (`--scale`, docker/compose.replicas.yml) on the host's loopback, HAProxy
in front (trt_plugin_kit.deploy.balancer), the Locust mix through HAProxy with the clients' retry policy (an
error of
the path to a server, i.e. connection refused/reset, 502/503/504 or gRPC UNAVAILABLE, is sent again on a new
connection, at most RETRIES times: inference is idempotent). In the middle of the run one replica's container
is killed (SIGKILL to its first process, as a crash would end it) and started again DOWN_FOR_S later (its
restart policy held off meanwhile, so that the balancer has to notice). Checked:

- no request failed once the retry policy had its say;
- HAProxy took the dead replica out of both backends within the bound its health checks set
  (HealthCheck.detection_bound_s), and sent it nothing more until it was healthy again;
- every replica served requests (its own Triton counters, read on its metrics port);
- the replica that came back served requests again.

The figures (requests, retries, failures, time to stop routing, per-replica counts) are returned and written
as a record (loadtests/record.py) to failover.json and failover.md in the run's folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from loadtests import report
from loadtests.record import Record, write_record
from loadtests.runner import RunPlan, run_locust
from loadtests.workloads import PROTOCOLS, REQUEST_KINDS, WorkloadConfig, digit_source
from trt_plugin_kit.deploy.balancer import (
    GRPC_BACKEND,
    HTTP_BACKEND,
    Balancer,
    BalancerError,
    HealthCheck,
    find_haproxy,
    server_name,
)
from trt_plugin_kit.deploy.replica_slot import SLOT_STRIDE, free_slot_base, slot_ports
from trt_plugin_kit.serving.host import free_port
from trt_plugin_kit.tritonserver import metrics
from trt_plugin_kit.tritonserver.options import ServerLocation

REPLICAS = 3
USERS = 6
# Each user paced (90 requests/s in all): enough for every replica to serve and for requests to meet the
# killed one, without taking the cores the rest of make test runs on.
USER_RATE = 15.0
RUN_S = 50
KILL_AT_S = 12
# The killed replica stays down this long before it is started again: longer than the health checks need to
# take it out (HealthCheck.detection_bound_s), so that the balancer has to. Its restart policy alone can
# bring a CPU replica back in 2-3 s, before the checks of one backend have failed `fall` times.
DOWN_FOR_S = 8.0
RETRIES = 2
VICTIM_SLOT = 1
SUCCESS_COUNTER = metrics.REQUEST_SUCCESS
STUDY = "failover"
PROGRAM = "python scripts/compose_test.py (its failover step)"


class FailoverFailed(Exception):
    """The scenario found something wrong; the message says what."""


def served_requests(metrics_port: int) -> float | None:
    """Requests a replica completed (nv_inference_request_success over its models), None if it is down."""
    return metrics.total(f"http://127.0.0.1:{metrics_port}/metrics", SUCCESS_COUNTER)


@dataclass
class Observations:
    """What the sampler saw, with times in seconds since the load started."""

    kill_at: float | None = None
    started_again_at: float | None = None
    down_at: dict[str, float] = field(default_factory=dict)  # backend -> victim marked DOWN
    up_again_at: dict[str, float] = field(default_factory=dict)  # backend -> victim UP again
    routed: dict[tuple[str, str], list[tuple[float, int]]] = field(default_factory=dict)  # stot changes
    served: dict[int, list[tuple[float, float | None]]] = field(default_factory=dict)  # slot -> counter


def sample(balancer: Balancer, base: int, start: float, stop: threading.Event, seen: Observations) -> None:
    victim = server_name(VICTIM_SLOT)
    last_metrics = 0.0
    while not stop.is_set():
        now = time.monotonic() - start
        for (backend, server), row in balancer.stats().items():
            history = seen.routed.setdefault((backend, server), [])
            total = int(row["stot"] or 0)
            if not history or history[-1][1] != total:
                history.append((now, total))
            if server == victim and seen.kill_at is not None:
                if row["status"].startswith("DOWN") and backend not in seen.down_at:
                    seen.down_at[backend] = now
                if row["status"] == "UP" and backend in seen.down_at and backend not in seen.up_again_at:
                    seen.up_again_at[backend] = now
        if now - last_metrics >= 1.0:
            last_metrics = now
            for slot in range(REPLICAS):
                seen.served.setdefault(slot, []).append(
                    (now, served_requests(slot_ports(base, slot).metrics))
                )
        stop.wait(0.1)


def replica_containers(compose: list[str], env: dict[str, str]) -> dict[int, str]:
    """{slot: container id} of the running replicas."""
    ids = subprocess.run([*compose, "ps", "-q", "triton-cpu"], env=env, capture_output=True, text=True).stdout
    slots = {}
    for container in ids.split():
        port = subprocess.run(
            ["docker", "exec", container, "cat", "/tmp/http-port"], capture_output=True, text=True
        ).stdout.strip()
        if port:
            slots[(int(port) - int(env["TRITON_REPLICA_BASE_PORT"])) // SLOT_STRIDE] = container
    return slots


def kill_replica(container: str) -> None:
    """SIGKILL to the container's first process, from the host, as the OOM killer or a crash would end it:
    the whole replica dies at once, in-flight requests with it. (`docker kill` counts as stopping it by
    hand, and the restart policy would leave it down.)"""
    pid = subprocess.run(
        ["docker", "inspect", "-f", "{{.State.Pid}}", container], capture_output=True, text=True, check=True
    ).stdout.strip()
    if not pid.isdigit() or int(pid) <= 1:
        raise FailoverFailed(f"container {container} has no running process ({pid!r})")
    os.kill(int(pid), signal.SIGKILL)


def docker_restart_policy(container: str, policy: str) -> None:
    subprocess.run(["docker", "update", f"--restart={policy}", container], capture_output=True, check=True)


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise FailoverFailed(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(0.2)


def _counts_between(points: list[tuple[float, float | None]], since: float, until: float) -> float:
    values = [value for t, value in points if since <= t <= until and value is not None]
    return values[-1] - values[0] if len(values) >= 2 else 0.0


def run_failover(compose: list[str], env: dict[str, str], run_dir: Path, up_timeout_s: float = 400) -> dict:
    """Scales triton-cpu to REPLICAS with the replicas override, runs the scenario, returns the figures.
    `compose` is the project's compose command line (files, project name, profile) without a subcommand."""
    run_dir.mkdir(parents=True, exist_ok=True)
    record = Record.begin(
        STUDY, PROGRAM, [], server=f"{REPLICAS} replicas of the compose CPU profile behind HAProxy, one host"
    )
    try:
        find_haproxy()
    except BalancerError as error:
        raise FailoverFailed(str(error)) from None
    try:
        base = free_slot_base(REPLICAS)
    except OSError as error:
        raise FailoverFailed(str(error)) from None
    env = dict(env, TRITON_REPLICA_BASE_PORT=str(base))
    up = [*compose, "up", "-d", "--wait", "--wait-timeout", str(int(up_timeout_s)), "--scale"]
    result = subprocess.run(
        [*up, f"triton-cpu={REPLICAS}", "triton-cpu"], env=env, timeout=up_timeout_s + 60, check=False
    )
    if result.returncode != 0:
        raise FailoverFailed(
            f"`up --scale triton-cpu={REPLICAS}` exited with {result.returncode}; "
            + replica_logs(compose, env, run_dir / "replicas.log")
        )
    containers = replica_containers(compose, env)
    if sorted(containers) != list(range(REPLICAS)):
        raise FailoverFailed(f"replicas hold slots {sorted(containers)}, expected 0..{REPLICAS - 1}")
    check = HealthCheck()
    http_port, grpc_port = free_port(), free_port()
    try:
        with Balancer(REPLICAS, base, http_port, grpc_port, run_dir / "haproxy.log", check) as balancer:
            wait_until(
                lambda: all(row["status"] == "UP" for row in balancer.stats().values()),
                30,
                "HAProxy sees every replica healthy",
            )
            plan = RunPlan.measurement(
                ServerLocation("127.0.0.1", http_port, grpc_port),
                WorkloadConfig(
                    protocols=dict.fromkeys(PROTOCOLS, 1),
                    mix=dict.fromkeys(REQUEST_KINDS, 1),
                    retries=RETRIES,
                    user_rate=USER_RATE,
                ),
                USERS,
                f"{RUN_S}s",
                10.0,
                out_dir=run_dir / "loadtest",
                digits=digit_source(None).description,
            )
            seen, stop = Observations(), threading.Event()
            start = time.monotonic()
            sampler = threading.Thread(target=sample, args=(balancer, base, start, stop, seen), daemon=True)
            sampler.start()
            summary_box: list[report.RunSummary] = []
            load = threading.Thread(
                target=lambda: summary_box.append(run_locust(plan, "failover")), daemon=True
            )
            load.start()
            time.sleep(KILL_AT_S)
            victim = containers[VICTIM_SLOT]
            docker_restart_policy(victim, "no")
            kill_replica(victim)
            seen.kill_at = time.monotonic() - start
            time.sleep(DOWN_FOR_S)
            docker_restart_policy(victim, "unless-stopped")  # the compose file's, as before the kill
            subprocess.run(["docker", "start", victim], capture_output=True, check=True)
            seen.started_again_at = time.monotonic() - start
            load.join(RUN_S + 120)
            stop.set()
            sampler.join(10)
    except BalancerError as error:
        raise FailoverFailed(str(error)) from None
    if not summary_box:
        raise FailoverFailed("the load test did not finish")
    return judge(summary_box[0], seen, check, run_dir / "loadtest" / report.FINAL_STATS_FILE, run_dir, record)


def replica_logs(compose: list[str], env: dict[str, str], path: Path, tail: int = 40) -> str:
    """The replicas' logs into path (a replica that did not come up says why there, before `down -v` removes
    it); returns their last lines, which the compose test prints."""
    logs = subprocess.run(
        [*compose, "logs", "--no-color", "--timestamps", "triton-cpu"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    path.write_text(logs.stdout + logs.stderr)
    last = "\n".join((logs.stdout + logs.stderr).splitlines()[-tail:])
    return f"the replicas' logs in {path}, the last {tail} lines:\n{last}"


def failover_markdown(record: Record) -> list[str]:
    """The record's page: its head, then one line per figure."""
    return [
        "# Failover: one replica killed under load",
        "",
        *record.head_lines(),
        "",
        "| figure | value |",
        "|---|---|",
        *[f"| {name} | {json.dumps(value)} |" for name, value in record.figures.items()],
    ]


def judge(
    summary: report.RunSummary,
    seen: Observations,
    check: HealthCheck,
    final_stats: Path,
    run_dir: Path,
    record: Record,
) -> dict:
    retries = json.loads(final_stats.read_text()).get("retries", {})
    retried_errors = json.loads(final_stats.read_text()).get("retried_errors", {})
    victim = server_name(VICTIM_SLOT)
    end = max(t for points in seen.served.values() for t, _ in points)
    detection = {b: seen.down_at[b] - seen.kill_at for b in seen.down_at}
    # The dead replica's routing counter: unchanged from HAProxy marking it down until it is UP again.
    routed_while_down, routed_before_out = {}, {}
    for backend in (HTTP_BACKEND, GRPC_BACKEND):
        history = seen.routed.get((backend, victim), [])
        down, up = seen.down_at.get(backend), seen.up_again_at.get(backend, end + 1)
        routed_while_down[backend] = [t for t, _ in history if down is not None and down < t < up]
        # Sent to the dead replica before HAProxy took it out: each was redispatched or retried.
        totals = [total for t, total in history if t <= (down if down is not None else end)]
        at_kill = [total for t, total in history if t <= seen.kill_at]
        routed_before_out[backend] = totals[-1] - at_kill[-1] if totals and at_kill else 0
    per_replica = {}
    for slot, points in seen.served.items():
        if slot == VICTIM_SLOT:
            back = min(seen.up_again_at.values(), default=end)
            per_replica[server_name(slot)] = {
                "before_kill": _counts_between(points, 0, seen.kill_at),
                "after_return": _counts_between(points, back, end),
            }
        else:
            per_replica[server_name(slot)] = {"whole_run": _counts_between(points, 0, end)}
    figures = {
        "replicas": REPLICAS,
        "users": USERS,
        "run_s": RUN_S,
        "killed": f"{victim} at {seen.kill_at:.1f} s, started again at {seen.started_again_at:.1f} s",
        "requests": summary.total.requests,
        "failures": summary.total.failures,
        "retries": sum(retries.values()),
        "retried_errors": retried_errors,
        "health_check": f"every {check.inter_ms} ms, fall {check.fall}, rise {check.rise}",
        "detection_bound_s": check.detection_bound_s(),
        "out_of_rotation_after_s": {b: round(s, 2) for b, s in detection.items()},
        "back_in_rotation_after_s": {b: round(t - seen.kill_at, 1) for b, t in seen.up_again_at.items()},
        "routed_to_victim_after_kill_before_out": routed_before_out,
        "routed_to_victim_while_down": {b: len(v) for b, v in routed_while_down.items()},
        "served_per_replica": per_replica,
    }
    record.figures = figures
    write_record(record, run_dir / "failover.json", failover_markdown(record))
    problems = []
    if summary.total.failures:
        problems.append(f"{summary.total.failures} requests failed despite {RETRIES} retries")
    if not summary.total.requests:
        problems.append("no request was made")
    for backend in (HTTP_BACKEND, GRPC_BACKEND):
        if backend not in detection:
            problems.append(f"HAProxy never took {victim} out of {backend}")
        elif detection[backend] > check.detection_bound_s():
            problems.append(
                f"{backend}: {victim} out after {detection[backend]:.1f} s > {check.detection_bound_s()}"
            )
        if routed_while_down[backend]:
            problems.append(f"{backend}: requests sent to {victim} while it was down")
        if backend not in seen.up_again_at:
            problems.append(f"{victim} never came back into {backend}")
    for name, counts in per_replica.items():
        if not all(value > 0 for value in counts.values()):
            problems.append(f"{name} served no request in a part of the run: {counts}")
    if problems:
        raise FailoverFailed("; ".join(problems) + f" (figures in {run_dir / 'failover.json'})")
    return figures
