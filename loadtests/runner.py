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
from loadtests.options import (
    add_workload_arguments,
    locust_arguments,
    milliseconds,
    parse_duration,
    parse_user_counts,
    run_time,
    workload_from_args,
)
from loadtests.workloads import WorkloadConfig, digit_source
from trt_plugin_kit.interface import MNIST, MNIST_PIPELINE, REPO_ROOT
from trt_plugin_kit.serving.host import Ports, ServingError, choose_variant
from trt_plugin_kit.serving.server import TritonServer
from trt_plugin_kit.tritonserver.options import (
    ServerLocation,
    add_env_argument,
    add_server_location_arguments,
    add_server_variant_argument,
    fraction,
    join_negative_values,
    non_negative_float,
    positive_seconds,
)
from trt_plugin_kit.tritonserver.protocol import NotReady, wait_until_ready

LOCUSTFILE = Path(__file__).resolve().parent / "locustfile.py"
USER_CLASSES = {"http": "HttpTritonUser", "grpc": "GrpcTritonUser"}
LIVE_STATS_FILE = "locust_live_stats.json"

EXIT_PASSED, EXIT_THRESHOLDS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # the shell's code for Ctrl-C
EXIT_GRACE_S = 15.0  # how long Locust may take to exit once its reports are written


class LoadTestError(Exception):
    """The load test could not run (as opposed to: it ran and broke a threshold)."""


@dataclass
class RunPlan:
    """One headless Locust run."""

    location: ServerLocation
    workload: WorkloadConfig
    users: int
    spawn_rate: float
    run_time: str
    timeout_s: float
    out_dir: Path
    thresholds: report.Thresholds
    digits: str  # where the digits come from (DigitSource.description): what the caller already loaded
    extra_info: dict = field(default_factory=dict)

    @classmethod
    def measurement(
        cls,
        location: ServerLocation,
        workload: WorkloadConfig,
        users: int,
        run_time: str,
        timeout_s: float,
        out_dir: Path,
        digits: str,
    ) -> RunPlan:
        """A run of the measuring tools (baseline, queue signal, failover): every user starts at once and
        the default thresholds hold (no failed request; p99 reported, not judged)."""
        return cls(
            location, workload, users, users, run_time, timeout_s, out_dir, report.Thresholds(), digits
        )

    def expected_request_names(self) -> list[str]:
        """Request types the run must show: those of protocols whose share of the users is at least one
        (Locust splits users by weight, so with few users a protocol of small weight may get none)."""
        total_weight = sum(self.workload.protocols.values())
        sure = {p for p, w in self.workload.protocols.items() if w > 0 and self.users * w / total_weight >= 1}
        return [name for name in self.workload.request_names() if name.split(" ", 1)[0] in sure]

    def locust_command(self) -> list[str]:
        """`locust --headless ...` with the load options of this run and the workload as the same flags
        `python -m loadtests` takes (loadtests/options.py)."""
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
            "--host",
            self.location.host,
            "--http-port",
            str(self.location.http_port),
            "--grpc-port",
            str(self.location.grpc_port),
            *locust_arguments(self.workload, self.timeout_s),
            "--final-stats",
            str(self.out_dir / report.FINAL_STATS_FILE),
            "--live-stats",
            str(self.out_dir / LIVE_STATS_FILE),
        ]
        # Only the protocols that get users: Locust refuses classes it cannot give a weight to.
        command += [USER_CLASSES[p] for p, weight in self.workload.protocols.items() if weight > 0]
        return command

    def run_info(self, started_at: str) -> dict:
        return {
            "started_at": started_at,
            "users": self.users,
            "spawn_rate": self.spawn_rate,
            "run_time": self.run_time,
            "http_url": self.location.address("http"),
            "grpc_url": self.location.address("grpc"),
            "protocols": self.workload.protocols,
            "mix": self.workload.mix,
            "mnist_batch": self.workload.mnist_batch,
            "l2norm_batch": self.workload.l2norm_batch,
            "l2norm_dim": self.workload.l2norm_dim,
            "user_rate": self.workload.user_rate,
            "digits": self.digits,
            "timeout_s": self.timeout_s,
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


def _running_totals(path: Path) -> dict | None:
    """The totals the locustfile rewrites every second (Locust's stats API, not its CSV files)."""
    try:
        return json.loads(path.read_text())["total"]
    except (OSError, ValueError, KeyError):
        return None


def _describe_totals(total: dict) -> str:
    return (
        f"{total['requests']:,} requests, {total['failures']:,} failed, {total['requests_per_s']:.0f} req/s"
    )


# The bar counts seconds of the run; its text is the totals so far ("5/12 s, 1,901 requests, ...").
PROGRESS_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s{postfix}"


def run_locust(plan: RunPlan, label: str) -> report.RunSummary:
    """Runs Locust headless for plan.run_time with a progress bar; returns the judged summary."""
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    log_path = plan.out_dir / "locust.log"
    duration = parse_duration(plan.run_time)
    # Locust needs a few seconds to start and to write its reports; beyond this it is stuck.
    deadline = time.monotonic() + duration + 60 + plan.users / plan.spawn_rate
    history_csv = plan.out_dir / f"{report.CSV_PREFIX}_stats_history.csv"
    live_stats = plan.out_dir / LIVE_STATS_FILE
    live_stats.unlink(missing_ok=True)
    progress = tqdm(total=round(duration), desc=label, bar_format=PROGRESS_FORMAT, leave=True)
    with log_path.open("w") as log, progress as bar:
        process = subprocess.Popen(
            plan.locust_command(),
            cwd=REPO_ROOT,
            env=_locust_environment(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        reports = (plan.out_dir / report.FINAL_STATS_FILE, plan.out_dir / "locust.html")
        stuck_at_exit = False
        try:
            # The run's clock starts when Locust's test does (its first live totals): Locust takes about 2 s
            # to start, which the bar counted as seconds of a run that sent nothing.
            start, reports_done_at = None, None
            bar.set_postfix_str("starting Locust", refresh=True)
            while process.poll() is None:
                # Its reports written, Locust has nothing left but to exit. Once in five failover runs (a
                # replica killed under it) it hung there instead, cause not found: not a failed run.
                if reports_done_at is None and all(path.is_file() for path in reports):
                    reports_done_at = time.monotonic()
                if reports_done_at is not None and time.monotonic() - reports_done_at > EXIT_GRACE_S:
                    stuck_at_exit = True
                    print(
                        f"Locust wrote its reports but did not exit within {EXIT_GRACE_S:g} s: stopped",
                        flush=True,
                    )
                    break
                if time.monotonic() > deadline:
                    raise LoadTestError(f"Locust did not finish in time; see {log_path}")
                time.sleep(1.0)
                totals = _running_totals(live_stats)
                if totals and start is None:
                    start = time.monotonic()
                bar.n = min(round(time.monotonic() - start), bar.total) if start is not None else 0
                if totals:
                    bar.set_postfix_str(_describe_totals(totals), refresh=False)
                bar.refresh()
            # The last line: Locust's final statistics, the very figures of the summary.
            totals = _running_totals(live_stats)
            if totals:
                bar.n = bar.total
                bar.set_postfix_str(_describe_totals(totals))
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
    if (process.returncode not in (0, 1) and not stuck_at_exit) or missing:
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
def start_server(variant: str, log_file: Path) -> Iterator[ServerLocation]:
    """Starts Triton on free loopback ports the way `make serve` does; stops it on exit."""
    resolved, reason = choose_variant(variant)
    print(f"starting Triton ({resolved}: {reason}); log {log_file}", file=sys.stderr)
    with TritonServer(variant=resolved, ports=Ports.free(), log_file=log_file) as server:
        yield server.location


def wait_for_server(location: ServerLocation, models: list[str], timeout_s: float) -> str:
    """Waits until the server and the models are ready over both protocols; returns the server version."""
    try:
        metadata = wait_until_ready(location, models=models, timeout_s=timeout_s)
    except NotReady as error:
        hint = ". Start one with `make serve`, or pass --start-server." if error.waited_out else ""
        raise LoadTestError(f"{error}{hint}") from None
    return metadata.get("version", "unknown")


# ---------------------------------------------------------------------------------------------------
# Command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m loadtests",
        description="Headless Locust load test of the Triton models over HTTP and gRPC, with reports "
        "and pass/fail thresholds. Every option also reads the environment variable named in its help; "
        "the flag wins.",
    )
    target = add_server_location_arguments(parser)
    target.add_argument(
        "--start-server",
        action="store_true",
        default=os.environ.get("LOADTEST_START_SERVER", "") == "1",
        help="start Triton like `make serve`, on free loopback ports ($LOADTEST_START_SERVER=1)",
    )
    add_server_variant_argument(target)
    add_env_argument(
        target,
        "--wait-for-server",
        variable="LOADTEST_WAIT_FOR_SERVER",
        default=30.0,
        convert=positive_seconds,
        metavar="SECONDS",
        help="how long to wait for the server and models to be ready",
    )

    load = parser.add_argument_group("load")
    add_env_argument(
        load,
        "--users",
        variable="LOADTEST_USERS",
        default=[4],
        convert=parse_user_counts,
        metavar="N[,N...]",
        help="concurrent users; a list (1,4,16) runs one test per count",
    )
    add_env_argument(
        load,
        "--spawn-rate",
        variable="LOADTEST_SPAWN_RATE",
        default=0.0,
        convert=non_negative_float,
        metavar="USERS/S",
        help="users started per second; 0: all at once",
    )
    add_env_argument(
        load,
        "--run-time",
        variable="LOADTEST_RUN_TIME",
        default="60s",
        convert=run_time,
        metavar="TIME",
        help="per run: 30s, 2m, 1h30m",
    )
    add_workload_arguments(parser)

    verdict = parser.add_argument_group("thresholds and reports")
    add_env_argument(
        verdict,
        "--max-failure-ratio",
        variable="LOADTEST_MAX_FAILURE_RATIO",
        default=0.0,
        convert=fraction,
        metavar="FRACTION",
        help="highest failed/total per request type and overall",
    )
    add_env_argument(
        verdict,
        "--max-p99-ms",
        variable="LOADTEST_MAX_P99_MS",
        default=None,
        convert=milliseconds,
        metavar="MS",
        help="highest p99 response time per request type, ms",
        shown="not judged",
    )
    add_env_argument(
        verdict,
        "--reports-dir",
        variable="LOADTEST_REPORTS_DIR",
        default=None,
        convert=Path,
        metavar="DIR",
        help="where reports go",
        shown="reports/loadtest-<UTC time>/",
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
    args = build_parser().parse_args(join_negative_values(sys.argv[1:] if argv is None else argv))
    user_counts = args.users
    workload = workload_from_args(args)
    models = [kind for kind, weight in workload.mix.items() if weight > 0]
    try:
        # Digits only for a mix that sends them (a summary of "1024 MNIST dev digits" for l2norm was wrong).
        source = digit_source(workload.mnist_dir) if set(models) & {MNIST, MNIST_PIPELINE} else None
        workload.build_tasks()  # fails here, with the reason, on bad sizes
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    if source is not None and source.note:
        print(f"note: {source.note}", file=sys.stderr)
    thresholds = report.Thresholds(args.max_failure_ratio, args.max_p99_ms)

    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    out_dir = args.reports_dir or REPO_ROOT / "reports" / f"loadtest-{stamp}"
    with ExitStack() as stack:
        try:
            if args.start_server:
                location = stack.enter_context(start_server(args.server_variant, out_dir / "server.log"))
            else:
                location = ServerLocation.from_args(args)
            print(
                f"waiting up to {args.wait_for_server:g} s for Triton at {location.describe()} "
                f"(models: {', '.join(models)})",
                file=sys.stderr,
            )
            version = wait_for_server(location, models, args.wait_for_server)
            plans = [
                RunPlan(
                    location=location,
                    workload=workload,
                    users=users,
                    spawn_rate=args.spawn_rate or users,
                    run_time=args.run_time,
                    timeout_s=args.timeout,
                    out_dir=out_dir / f"users-{users}" if len(user_counts) > 1 else out_dir,
                    thresholds=thresholds,
                    digits=source.description if source else "none (no digit model in the mix)",
                    extra_info={"triton_version": version},
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
