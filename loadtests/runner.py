"""`python -m loadtests` (`make loadtest`): headless Locust runs against Triton, reports, thresholds.

One run per user count (`--users 4` or a sweep `--users 1,4,16`), each in its own subprocess
`locust -f loadtests/locustfile.py --headless ...` (Locust patches the process for gevent, so it gets a
process of its own). Per run folder: Locust's CSV and HTML reports, summary.md / summary.json and a
latency/throughput chart. Exit status: 0 all thresholds held, 1 a threshold broke, 2 the test could not
run (no server, bad option, Locust crashed).

Every option also reads an environment variable (for containers and CI), e.g. TRITON_HOST=triton.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from tqdm import tqdm

from loadtests import report
from loadtests.workloads import PROTOCOLS, REQUEST_KINDS, WorkloadConfig, parse_weights
from trt_plugin_kit.serving import Ports, ServingError, TritonServer, choose_variant

REPO_ROOT = Path(__file__).resolve().parents[1]
LOCUSTFILE = Path(__file__).resolve().parent / "locustfile.py"
USER_CLASSES = {"http": "HttpTritonUser", "grpc": "GrpcTritonUser"}

EXIT_PASSED, EXIT_THRESHOLDS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # the shell's code for Ctrl-C


class LoadTestError(Exception):
    """The load test could not run (as opposed to: it ran and broke a threshold)."""


def parse_duration(text: str) -> float:
    """Locust's time spans: "90", "30s", "2m", "1h30m", "1m30s" -> seconds."""
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    if not match or not any(match.groups()):
        raise ValueError(f"bad duration {text!r}: use e.g. 30s, 2m, 1h30m")
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    seconds = hours * 3600 + minutes * 60 + seconds
    if seconds <= 0:
        raise ValueError(f"duration {text!r} must be longer than zero")
    return float(seconds)


def parse_user_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--users takes whole numbers separated by commas, got {text!r}") from None
    if not counts or any(count < 1 for count in counts):
        raise ValueError(f"--users needs at least one count, each >= 1; got {text!r}")
    return counts


@dataclass
class Target:
    """Where the Triton server under test listens."""

    host: str
    http_port: int
    grpc_port: int

    @property
    def http_url(self) -> str:
        return f"{self.host}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{self.host}:{self.grpc_port}"


@dataclass
class RunPlan:
    """One headless Locust run."""

    target: Target
    workload: WorkloadConfig
    users: int
    spawn_rate: float
    run_time: str
    request_timeout: float
    out_dir: Path
    thresholds: report.Thresholds
    extra_info: dict = field(default_factory=dict)
    retries: int = 0  # client retries after errors of the path to a server (locustfile --retries)

    def expected_request_names(self) -> list[str]:
        """Request types the run must show: those of protocols whose share of the users is at least one
        (Locust splits users by weight, so with few users a protocol of small weight may get none)."""
        total_weight = sum(self.workload.protocols.values())
        sure = {p for p, w in self.workload.protocols.items() if w > 0 and self.users * w / total_weight >= 1}
        return [name for name in self.workload.request_names() if name.split(" ", 1)[0] in sure]

    def locust_command(self) -> list[str]:
        w = self.workload
        command = [
            sys.executable,
            "-m",
            "locust",
            "-f",
            str(LOCUSTFILE),
            "--headless",
            "--only-summary",
            "--users",
            str(self.users),
            "--spawn-rate",
            f"{self.spawn_rate:g}",
            "--run-time",
            self.run_time,
            "--csv",
            str(self.out_dir / report.CSV_PREFIX),
            "--csv-full-history",
            "--html",
            str(self.out_dir / "locust.html"),
            "--loglevel",
            "INFO",
            "--triton-host",
            self.target.host,
            "--triton-http-port",
            str(self.target.http_port),
            "--triton-grpc-port",
            str(self.target.grpc_port),
            "--protocol-mix",
            ",".join(f"{k}={v}" for k, v in w.protocols.items()),
            "--request-mix",
            ",".join(f"{k}={v}" for k, v in w.mix.items()),
            "--mnist-batch",
            str(w.mnist_batch),
            "--l2norm-batch",
            str(w.l2norm_batch),
            "--l2norm-dim",
            str(w.l2norm_dim),
            "--request-timeout",
            f"{self.request_timeout:g}",
            "--final-stats",
            str(self.out_dir / report.FINAL_STATS_FILE),
            "--retries",
            str(self.retries),
        ]
        if w.images_path:
            command += ["--mnist-images", str(w.images_path)]
        # Only the protocols that get users: Locust refuses classes it cannot give a weight to.
        command += [USER_CLASSES[p] for p, weight in w.protocols.items() if weight > 0]
        return command

    def run_info(self, started_at: str) -> dict:
        return {
            "started_at": started_at,
            "users": self.users,
            "spawn_rate": self.spawn_rate,
            "run_time": self.run_time,
            "http_url": self.target.http_url,
            "grpc_url": self.target.grpc_url,
            "protocols": self.workload.protocols,
            "mix": self.workload.mix,
            "mnist_batch": self.workload.mnist_batch,
            "l2norm_batch": self.workload.l2norm_batch,
            "l2norm_dim": self.workload.l2norm_dim,
            "request_timeout_s": self.request_timeout,
            "retries": self.retries,
            **self.extra_info,
        }


def _locust_environment() -> dict[str, str]:
    env = dict(os.environ)
    # The locustfile imports loadtests.* and trt_plugin_kit.*: make them importable without installing.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    # Options come from the command line only; stale LOCUST_* variables must not change a run silently.
    for name in [n for n in env if n.startswith("LOCUST_")]:
        del env[name]
    return env


def _latest_total(history_csv: Path) -> tuple[float, int, int] | None:
    """(current requests/s, requests, failures) from the newest Aggregated row Locust has flushed."""
    try:
        lines = history_csv.read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines[1:]):
        cells = line.split(",")
        if len(cells) > 4 and cells[3] == report.TOTAL_NAME:
            try:
                return float(cells[4]), int(cells[-7]), int(cells[-6])
            except ValueError:
                return None
    return None


def run_locust(plan: RunPlan, label: str) -> report.RunSummary:
    """Runs Locust headless for plan.run_time with a progress bar; returns the judged summary."""
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    log_path = plan.out_dir / "locust.log"
    duration = parse_duration(plan.run_time)
    # Locust needs a few seconds to start and to write its reports; beyond this it is stuck.
    deadline = time.monotonic() + duration + 60 + plan.users / plan.spawn_rate
    history_csv = plan.out_dir / f"{report.CSV_PREFIX}_stats_history.csv"
    with log_path.open("w") as log, tqdm(total=round(duration), desc=label, unit="s", leave=True) as bar:
        process = subprocess.Popen(
            plan.locust_command(),
            cwd=REPO_ROOT,
            env=_locust_environment(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            start = time.monotonic()
            while process.poll() is None:
                if time.monotonic() > deadline:
                    raise LoadTestError(f"Locust did not finish in time; see {log_path}")
                time.sleep(1.0)
                bar.n = min(round(time.monotonic() - start), bar.total)
                latest = _latest_total(history_csv)
                if latest:
                    bar.set_postfix(rps=f"{latest[0]:.0f}", requests=latest[1], failures=latest[2])
                bar.refresh()
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    # Locust exits 1 when any request failed: that is judged by the thresholds below. Any other status, or
    # missing reports (Locust also exits 1 when it crashes), means there is nothing to judge.
    expected_files = (plan.out_dir / report.FINAL_STATS_FILE, plan.out_dir / "locust.html", history_csv)
    missing = [path.name for path in expected_files if not path.is_file()]
    if process.returncode not in (0, 1) or missing:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-25:])
        raise LoadTestError(
            f"Locust exited with status {process.returncode}"
            + (f" without writing {', '.join(missing)}" if missing else "")
            + f"; last lines of {log_path}:\n{tail}"
        )
    summary = report.summarize_run(
        plan.out_dir, plan.run_info(started_at), plan.thresholds, plan.expected_request_names()
    )
    report.write_summary(summary, plan.out_dir)
    report.plot_run(history_csv, plan.out_dir / "chart.png", f"{label}: {plan.users} users")
    return summary


@contextmanager
def start_server(variant: str, log_file: Path) -> Iterator[Target]:
    """Starts Triton on free loopback ports the way `make serve` does; stops it on exit."""
    resolved, reason = choose_variant(variant)
    print(f"starting Triton ({resolved}: {reason}); log {log_file}", file=sys.stderr)
    with TritonServer(variant=resolved, ports=Ports.free(), log_file=log_file) as server:
        yield Target("127.0.0.1", server.ports.http, server.ports.grpc)


def wait_for_server(target: Target, models: list[str], timeout_s: float) -> str:
    """Waits until the server and the models are ready over both protocols; returns the server version."""
    import tritonclient.grpc
    import tritonclient.http

    deadline = time.monotonic() + timeout_s
    last_problem = "not tried"
    while True:
        try:
            http = tritonclient.http.InferenceServerClient(
                target.http_url, connection_timeout=5, network_timeout=5
            )
            grpc = tritonclient.grpc.InferenceServerClient(target.grpc_url)
            try:
                not_ready = [m for m in models if not http.is_model_ready(m)]
                not_ready += [f"{m} (gRPC)" for m in models if not grpc.is_model_ready(m, client_timeout=5)]
                if not not_ready:
                    return http.get_server_metadata().get("version", "unknown")
                last_problem = "models not ready: " + ", ".join(not_ready)
            finally:
                http.close()
                grpc.close()
        except Exception as error:  # any failure here means "not up yet"; reported if it lasts
            last_problem = f"{type(error).__name__}: {error}"
        if time.monotonic() >= deadline:
            raise LoadTestError(
                f"no ready Triton server at HTTP {target.http_url} / gRPC {target.grpc_url} after "
                f"{timeout_s:g}s ({last_problem}). Start one with `make serve`, or pass --start-server."
            )
        time.sleep(1.0)


# ---------------------------------------------------------------------------------------------------
# Command line


def _env(name: str, default: str | None) -> str | None:
    return os.environ.get(name, default)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m loadtests",
        description="Headless Locust load test of the Triton models over HTTP and gRPC, with reports "
        "and pass/fail thresholds. Each option's environment variable is given in brackets.",
    )
    target = parser.add_argument_group("server under test")
    target.add_argument("--host", default=_env("TRITON_HOST", "127.0.0.1"), help="[TRITON_HOST] 127.0.0.1")
    target.add_argument(
        "--http-port", type=int, default=int(_env("TRITON_HTTP_PORT", "8000")), help="[TRITON_HTTP_PORT] 8000"
    )
    target.add_argument(
        "--grpc-port", type=int, default=int(_env("TRITON_GRPC_PORT", "8001")), help="[TRITON_GRPC_PORT] 8001"
    )
    target.add_argument(
        "--start-server",
        action="store_true",
        default=_env("LOADTEST_START_SERVER", "") == "1",
        help="[LOADTEST_START_SERVER=1] start Triton like `make serve`, on free loopback ports",
    )
    target.add_argument(
        "--server-variant",
        choices=("auto", "tensorrt", "cpu"),
        default=_env("TRITON_VARIANT", "auto"),
        help="[TRITON_VARIANT] with --start-server: which server, as for `make serve` (auto)",
    )
    target.add_argument(
        "--wait-for-server",
        type=float,
        default=float(_env("LOADTEST_WAIT_FOR_SERVER", "30")),
        help="[LOADTEST_WAIT_FOR_SERVER] seconds to wait for the server and models to be ready (30)",
    )

    load = parser.add_argument_group("load")
    load.add_argument(
        "--users",
        default=_env("LOADTEST_USERS", "4"),
        help="[LOADTEST_USERS] concurrent users; a list (1,4,16) runs one test per count (4)",
    )
    load.add_argument(
        "--spawn-rate",
        type=float,
        default=float(_env("LOADTEST_SPAWN_RATE", "0")),
        help="[LOADTEST_SPAWN_RATE] users started per second; 0: all at once (0)",
    )
    load.add_argument(
        "--run-time", default=_env("LOADTEST_RUN_TIME", "60s"), help="[LOADTEST_RUN_TIME] per run (60s)"
    )
    load.add_argument(
        "--protocols",
        default=_env("LOADTEST_PROTOCOLS", "http=1,grpc=1"),
        help="[LOADTEST_PROTOCOLS] share of users per protocol, e.g. grpc or http=3,grpc=1 (http=1,grpc=1)",
    )
    load.add_argument(
        "--mix",
        default=_env("LOADTEST_MIX", "mnist_pipeline=1,mnist=1,l2norm=1"),
        help="[LOADTEST_MIX] share of requests per kind (mnist_pipeline=1,mnist=1,l2norm=1)",
    )
    load.add_argument(
        "--batch-size",
        type=int,
        default=int(_env("LOADTEST_BATCH_SIZE", "8")),
        help="[LOADTEST_BATCH_SIZE] digits per request to `mnist` (8)",
    )
    load.add_argument(
        "--l2norm-batch",
        type=int,
        default=int(_env("LOADTEST_L2NORM_BATCH", "4")),
        help="[LOADTEST_L2NORM_BATCH] vectors per request to `l2norm` (4)",
    )
    load.add_argument(
        "--l2norm-dim",
        type=int,
        default=int(_env("LOADTEST_L2NORM_DIM", "128")),
        help="[LOADTEST_L2NORM_DIM] vector length (128)",
    )
    load.add_argument(
        "--request-timeout",
        type=float,
        default=float(_env("LOADTEST_REQUEST_TIMEOUT", "10")),
        help="[LOADTEST_REQUEST_TIMEOUT] seconds before a request counts as failed (10)",
    )
    load.add_argument(
        "--retries",
        type=int,
        default=int(_env("LOADTEST_RETRIES", "0")),
        help="[LOADTEST_RETRIES] times a request is sent again after an error of the path to a server "
        "(connection refused/reset, HTTP 502/503/504, gRPC UNAVAILABLE): inference is idempotent (0)",
    )
    load.add_argument(
        "--mnist-images",
        default=_env("MNIST_IMAGES", None),
        help="[MNIST_IMAGES] IDX digits to send (../shared/data/mnist/mnist-dev-images-idx3-ubyte.gz)",
    )

    verdict = parser.add_argument_group("thresholds and reports")
    verdict.add_argument(
        "--max-failure-ratio",
        type=float,
        default=float(_env("LOADTEST_MAX_FAILURE_RATIO", "0")),
        help="[LOADTEST_MAX_FAILURE_RATIO] highest failed/total per request type and overall (0)",
    )
    max_p99 = _env("LOADTEST_MAX_P99_MS", None)
    verdict.add_argument(
        "--max-p99-ms",
        type=float,
        default=float(max_p99) if max_p99 else None,
        help="[LOADTEST_MAX_P99_MS] highest p99 response time per request type, ms (not judged unless set)",
    )
    verdict.add_argument(
        "--reports-dir",
        type=Path,
        default=Path(_env("LOADTEST_REPORTS_DIR", "")) if _env("LOADTEST_REPORTS_DIR", "") else None,
        help="[LOADTEST_REPORTS_DIR] where reports go (reports/loadtest-<UTC timestamp>/)",
    )
    return parser


def run_sweep(plans: list[RunPlan], out_dir: Path) -> list[tuple[int, report.RunSummary]]:
    results = []
    for index, plan in enumerate(plans, start=1):
        label = f"run {index}/{len(plans)}" if len(plans) > 1 else "load test"
        summary = run_locust(plan, label)
        for line in report.console_lines(summary):
            print(line)
        print(f"reports: {plan.out_dir}")
        results.append((plan.users, summary))
    if len(plans) > 1:
        write_sweep_summary(results, out_dir)
    return results


def write_sweep_summary(results: list[tuple[int, report.RunSummary]], out_dir: Path) -> None:
    """Top-level summary of a sweep: every run's request types in one table, and the scaling chart."""
    rows, users = [], []
    for count, summary in results:
        rows += summary.request_types
        users += [count] * len(summary.request_types)
    passed = all(summary.passed for _, summary in results)
    lines = [
        f"# Load test sweep {'PASSED' if passed else 'FAILED'}",
        "",
        *report.stats_table(rows, label_users=users),
        "",
        *[f"- {count} users: {v}" for count, summary in results for v in summary.violations],
    ]
    (out_dir / "summary.md").write_text("\n".join(lines) + "\n")
    (out_dir / "summary.json").write_text(
        json.dumps(
            {"schema": report.SUMMARY_SCHEMA, "passed": passed, "runs": [s.to_dict() for _, s in results]},
            indent=2,
        )
        + "\n"
    )
    report.plot_sweep(results, out_dir / "scaling.png", "requests/s and p99 by number of users")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        user_counts = parse_user_counts(args.users)
        parse_duration(args.run_time)
        workload = WorkloadConfig(
            protocols=parse_weights(args.protocols, PROTOCOLS, "protocol"),
            mix=parse_weights(args.mix, REQUEST_KINDS, "request kind"),
            mnist_batch=args.batch_size,
            l2norm_batch=args.l2norm_batch,
            l2norm_dim=args.l2norm_dim,
            images_path=args.mnist_images,
        )
        workload.build_tasks()  # fails here, with the reason, on bad batch sizes or missing digits
        thresholds = report.Thresholds(args.max_failure_ratio, args.max_p99_ms)
        if args.spawn_rate < 0 or args.request_timeout <= 0 or args.retries < 0:
            raise ValueError("--spawn-rate and --retries must be >= 0 and --request-timeout > 0")
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR

    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    out_dir = args.reports_dir or REPO_ROOT / "reports" / f"loadtest-{stamp}"
    models = [kind for kind, weight in workload.mix.items() if weight > 0]
    with ExitStack() as stack:
        try:
            if args.start_server:
                target = stack.enter_context(start_server(args.server_variant, out_dir / "server.log"))
            else:
                target = Target(args.host, args.http_port, args.grpc_port)
            print(
                f"waiting up to {args.wait_for_server:g}s for Triton at HTTP {target.http_url} / gRPC "
                f"{target.grpc_url} (models: {', '.join(models)})",
                file=sys.stderr,
            )
            version = wait_for_server(target, models, args.wait_for_server)
            plans = [
                RunPlan(
                    target=target,
                    workload=workload,
                    users=users,
                    spawn_rate=args.spawn_rate or users,
                    run_time=args.run_time,
                    request_timeout=args.request_timeout,
                    out_dir=out_dir / f"users-{users}" if len(user_counts) > 1 else out_dir,
                    thresholds=thresholds,
                    extra_info={"triton_version": version},
                    retries=args.retries,
                )
                for users in user_counts
            ]
            results = run_sweep(plans, out_dir)
        except (LoadTestError, ServingError) as error:
            print(f"error: {error}", file=sys.stderr)
            return EXIT_ERROR
        except KeyboardInterrupt:
            # Locust got the Ctrl-C too and has written what it had; a server we started is stopped on exit.
            print(f"interrupted; partial reports in {out_dir}", file=sys.stderr)
            return EXIT_INTERRUPTED
    passed = all(summary.passed for _, summary in results)
    print(f"{'PASSED' if passed else 'FAILED'}: reports in {out_dir}")
    return EXIT_PASSED if passed else EXIT_THRESHOLDS
