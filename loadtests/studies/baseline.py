"""`python -m loadtests.baseline`: measure what a server sustains, per request type, at a few user counts,
and write it down (records/baseline/baseline-YYYYMMDD.md + .png) as the reference later changes are compared
against.

Each request type (protocol x model) runs on its own at each user count, so every figure is that request
type's own throughput and latency, not a share of a mix. The machine is described in the file (CPU, cores,
memory, CPU use by other work just before each run: such work lowers the figures).

    python -m loadtests.baseline --start-server                 # the CPU server, as `make serve` starts it
    python -m loadtests.baseline --users 1,4,16 --run-time 30s  # a running server (--host, --http-port, ...)
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from loadtests import report
from loadtests.options import add_workload_arguments, parse_user_counts, run_time, workload_from_args
from loadtests.record import Record, add_output_argument, write_record
from loadtests.runner import (
    EXIT_ERROR,
    EXIT_PASSED,
    EXIT_THRESHOLDS,
    LoadTestError,
    RunPlan,
    run_locust,
    start_server,
    wait_for_server,
)
from loadtests.studies.quiet import wait_until_quiet
from loadtests.workloads import PROTOCOLS, REQUEST_KINDS, digit_source
from trt_plugin_kit.interface import REPO_ROOT
from trt_plugin_kit.serving.host import ServingError, choose_variant
from trt_plugin_kit.tritonserver.options import (
    ServerLocation,
    add_server_location_arguments,
    add_server_variant_argument,
    converter,
)

STUDY = "baseline"
PROGRAM = "python -m loadtests.baseline"
Results = list[tuple[int, report.RunSummary, float | None]]  # (users, summary, CPU busy % before the run)


def baseline_figures(results: Results, quiet_below: float, quiet_wait: float) -> dict:
    """The record's figures: one row per request type and user count, grouped by request type."""
    rows = sorted(
        (
            {
                "request_type": stats.name,
                "users": users,
                "requests_per_s": round(stats.requests_per_s, 1),
                "items_per_s": round(stats.items_per_s, 1) if stats.items_per_s is not None else None,
                "p50_ms": stats.p50_ms,
                "p95_ms": stats.p95_ms,
                "p99_ms": stats.p99_ms,
                "requests": stats.requests,
                "failures": stats.failures,
                "busy_percent": round(busy, 1) if busy is not None else None,
            }
            for users, summary, busy in results
            for stats in summary.request_types
        ),
        key=lambda row: (row["request_type"], row["users"]),
    )
    violations = [f"{users} users: {v}" for users, summary, _ in results for v in summary.violations]
    return {"rows": rows, "quiet_below": quiet_below, "quiet_wait": quiet_wait, "violations": violations}


def _ms(value: float | None) -> str:
    return f"{value:.0f}" if value is not None else "n/a"


def baseline_table(rows: list[dict]) -> list[str]:
    lines = [
        "| request type | users | req/s | items/s | p50 ms | p95 ms | p99 ms | requests | failures | busy |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        cells = [
            row["request_type"],
            str(row["users"]),
            f"{row['requests_per_s']:.1f}",
            f"{row['items_per_s']:.1f}" if row["items_per_s"] is not None else "n/a",
            *[_ms(row[key]) for key in ("p50_ms", "p95_ms", "p99_ms")],
            str(row["requests"]),
            str(row["failures"]),
            f"{row['busy_percent']:.0f}%" if row["busy_percent"] is not None else "n/a",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def baseline_markdown(record: Record, chart_name: str) -> str:
    """The record's page: how it was measured, then the figures."""
    figures = record.figures
    lines = [
        "# Load-test baseline",
        "",
        "What the serving path sustains on the machine below: each request type alone, closed loop (every",
        "simulated user sends its next request as soon as the previous one returns), at each user count.",
        "Later changes are compared against these figures: rerun the command on the same kind of machine",
        "(`--output /tmp/new.md` keeps the committed record) and compare the tables.",
        "",
        *record.head_lines(),
        "- load generator: Locust on the same machine as the server (loopback), so both share the cores.",
        "- items/s = req/s x batch (digits or vectors per second); percentiles are Locust's (whole ms);",
        "  busy = CPU use of the whole machine in the 2 s before the run, while the server idles: other",
        "  work on the machine, which lowers that run's figures (each run first waited up to",
        f"  {figures['quiet_wait']:g} s for it to fall to {figures['quiet_below']:g}%).",
        "",
        *baseline_table(figures["rows"]),
        "",
        f"![requests/s and p99 by number of users]({chart_name})",
        "",
    ]
    if figures["violations"]:
        broken = [f"- {v}" for v in figures["violations"]]
        lines += ["Thresholds broken during the measurement (failure ratio 0):", "", *broken, ""]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    add_server_location_arguments(parser)
    parser.add_argument(
        "--start-server", action="store_true", help="start Triton like `make serve` (free ports)"
    )
    add_server_variant_argument(parser)
    parser.add_argument(
        "--users", type=converter(parse_user_counts), default=[1, 4, 16], help="user counts (1,4,16)"
    )
    parser.add_argument(
        "--run-time", type=converter(run_time), default="30s", help="per request type and user count (30s)"
    )
    # --protocol and --mix as for `python -m loadtests`; here every protocol and kind they give a weight
    # is measured on its own.
    add_workload_arguments(parser)
    parser.add_argument(
        "--quiet-below",
        type=float,
        default=25.0,
        help="before each run, wait until the machine's CPU use is at most this many percent (25)",
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=300.0,
        help="longest wait for that, seconds; then run anyway (300)",
    )
    add_output_argument(parser, STUDY)
    parser.add_argument("--reports-dir", type=Path, default=None, help="Locust reports of every run")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    user_counts = args.users
    base = workload_from_args(args)
    protocols = [p for p in PROTOCOLS if base.protocols[p] > 0]
    kinds = [k for k in REQUEST_KINDS if base.mix[k] > 0]
    try:
        base.build_tasks()
        digits = digit_source(base.mnist_dir).description
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR

    stamp = datetime.now(timezone.utc)
    record = Record.begin(STUDY, PROGRAM, argv, stamp=stamp)
    reports_dir = args.reports_dir or REPO_ROOT / "reports" / f"baseline-{stamp:%Y%m%d-%H%M%S}"
    results: Results = []
    with ExitStack() as stack:
        try:
            if args.start_server:
                variant, _ = choose_variant(args.server_variant)
                location = stack.enter_context(start_server(variant, reports_dir / "server.log"))
                server = f"{variant} variant, started by this command as `make serve` starts it"
            else:
                location = ServerLocation.from_args(args)
                server = location.describe()
            version = wait_for_server(location, kinds, 30)
            server += f"; Triton {version}"
            grid = [(users, p, k) for users in user_counts for p in protocols for k in kinds]
            for index, (users, protocol, kind) in enumerate(grid, start=1):
                workload = replace(
                    base,
                    protocols={p: int(p == protocol) for p in PROTOCOLS},
                    mix={k: int(k == kind) for k in REQUEST_KINDS},
                )
                plan = RunPlan.measurement(
                    location,
                    workload,
                    users,
                    args.run_time,
                    args.timeout,
                    out_dir=reports_dir / f"users-{users}-{protocol}-{kind}",
                    digits=digits,
                )
                busy = wait_until_quiet(args.quiet_below, args.quiet_wait)
                summary = run_locust(plan, f"{index}/{len(grid)} {protocol} {kind} x{users}")
                print(*report.console_lines(summary)[:1], sep="\n")
                results.append((users, summary, busy))
        except (LoadTestError, ServingError) as error:
            print(f"error: {error}", file=sys.stderr)
            return EXIT_ERROR

    record.where["server"] = server
    record.figures = baseline_figures(results, args.quiet_below, args.quiet_wait)
    chart = args.output.with_suffix(".png")
    chart.parent.mkdir(parents=True, exist_ok=True)
    report.plot_sweep(
        [(users, summary) for users, summary, _ in results], chart, "baseline: each request type alone"
    )
    write_record(record, args.output, baseline_markdown(record, chart.name))
    print(f"baseline written to {args.output} (+ .json, .png); Locust reports in {reports_dir}")
    return EXIT_PASSED if all(summary.passed for _, summary, _ in results) else EXIT_THRESHOLDS


if __name__ == "__main__":
    sys.exit(main())
