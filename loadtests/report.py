"""Reads a run's statistics, judges them against thresholds, writes the summary and the charts.

Pure Python + matplotlib: nothing here talks to a server, so the pass/fail logic is unit-tested on its own.
The judged figures are Locust's own statistics at the end of the run (written by the locustfile's
--final-stats, the same numbers as Locust's HTML report); Locust's periodic CSV history feeds the charts.
Locust rounds response times to whole milliseconds below 100 ms (2 significant digits above), so
percentiles are in whole milliseconds.
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from loadtests.workloads import parse_request_name

SUMMARY_SCHEMA = 1
# Locust's file names under a run folder: `--csv <run_dir>/locust` gives locust_stats.csv,
# locust_stats_history.csv (the charts' data), ...; the locustfile's --final-stats the figures judged.
CSV_PREFIX = "locust"
FINAL_STATS_FILE = "locust_final_stats.json"
PERCENTILES = {"p50_ms": "50%", "p95_ms": "95%", "p99_ms": "99%"}
TOTAL_NAME = "Aggregated"


@dataclass
class RequestTypeStats:
    """What happened to one request type (or, for `total`, to all of them) during one run."""

    name: str
    protocol: str | None
    model: str | None
    batch: int | None
    requests: int
    failures: int
    requests_per_s: float
    items_per_s: float | None  # requests/s x batch: images or vectors per second
    avg_ms: float | None
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    avg_response_bytes: float | None

    @property
    def failure_ratio(self) -> float:
        return self.failures / self.requests if self.requests else 0.0


@dataclass(frozen=True)
class Thresholds:
    """Pass/fail bounds. max_p99_ms None: p99 is reported but not judged."""

    max_failure_ratio: float = 0.0
    max_p99_ms: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_failure_ratio <= 1.0:
            raise ValueError(f"max failure ratio must be within [0, 1], got {self.max_failure_ratio}")
        if self.max_p99_ms is not None and self.max_p99_ms <= 0:
            raise ValueError(f"max p99 must be a positive number of milliseconds, got {self.max_p99_ms}")


@dataclass
class RunSummary:
    """summary.json of one run (one user count)."""

    run: dict
    request_types: list[RequestTypeStats]
    total: RequestTypeStats
    errors: list[dict] = field(default_factory=list)
    exceptions: list[dict] = field(default_factory=list)
    thresholds: dict = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    schema: int = SUMMARY_SCHEMA

    @property
    def passed(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict:
        data = asdict(self)
        data["passed"] = self.passed
        data["total"]["failure_ratio"] = self.total.failure_ratio
        for entry, stats in zip(data["request_types"], self.request_types, strict=True):
            entry["failure_ratio"] = stats.failure_ratio
        return data


# ---------------------------------------------------------------------------------------------------
# Reading a run's statistics


def _number(text: str | None) -> float | None:
    if text is None or text.strip() in ("", "N/A"):
        return None
    value = float(text)
    return None if math.isnan(value) else value


def report_name(request_type: str | None, name: str) -> str:
    """Locust keeps a request's type (our protocol) and name ("mnist b8") apart; reports join them."""
    return f"{request_type} {name}" if request_type else name


def _stats_from_final(entry: dict) -> RequestTypeStats:
    name = report_name(entry.get("type"), entry["name"])
    parsed = parse_request_name(name)
    rps = float(entry["requests_per_s"])
    return RequestTypeStats(
        name=name,
        protocol=parsed.protocol if parsed else None,
        model=parsed.model if parsed else None,
        batch=parsed.batch if parsed else None,
        requests=int(entry["requests"]),
        failures=int(entry["failures"]),
        requests_per_s=rps,
        items_per_s=rps * parsed.batch if parsed else None,
        avg_ms=entry["avg_ms"],
        p50_ms=entry["p50_ms"],
        p95_ms=entry["p95_ms"],
        p99_ms=entry["p99_ms"],
        max_ms=entry["max_ms"],
        avg_response_bytes=entry["avg_response_bytes"],
    )


def read_final_stats(path: Path) -> tuple[list[RequestTypeStats], RequestTypeStats, list[dict], list[dict]]:
    """The statistics the locustfile writes when the run ends (--final-stats):
    (per request type, all together, errors per request type and message, load-test exceptions)."""
    if not path.is_file():
        raise FileNotFoundError(f"Locust wrote no final statistics {path}")
    try:
        data = json.loads(path.read_text())
        rows = [_stats_from_final(entry) for entry in data["request_types"]]
        total = _stats_from_final(data["total"])
        errors = [
            {"name": e["name"], "error": e["error"], "occurrences": int(e["occurrences"])}
            for e in data["errors"]
        ]
        exceptions = [{"count": int(e["count"]), "message": e["message"]} for e in data["exceptions"]]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"{path} is not a final statistics file of loadtests/locustfile.py: {error!r}"
        ) from None
    return rows, total, errors, exceptions


# ---------------------------------------------------------------------------------------------------
# Judging a run


def find_violations(
    request_types: list[RequestTypeStats],
    total: RequestTypeStats,
    thresholds: Thresholds,
    expected_names: list[str] = (),
    exceptions: list[dict] = (),
) -> list[str]:
    """Every way the run broke its thresholds, as sentences for humans; empty when it passed."""
    violations = []
    if total.requests == 0:
        violations.append("no request completed: the load test measured nothing")
    seen = {stats.name for stats in request_types if stats.requests > 0}
    for name in expected_names:
        if name not in seen:
            violations.append(f"{name}: no request of this type ran")
    for stats in [*request_types, total]:
        if stats.requests and stats.failure_ratio > thresholds.max_failure_ratio:
            violations.append(
                f"{stats.name}: failure ratio {stats.failure_ratio:.4f} ({stats.failures}/{stats.requests}) "
                f"above {thresholds.max_failure_ratio:g}"
            )
    if thresholds.max_p99_ms is not None:
        for stats in request_types:
            if stats.p99_ms is not None and stats.p99_ms > thresholds.max_p99_ms:
                violations.append(f"{stats.name}: p99 {stats.p99_ms:g} ms above {thresholds.max_p99_ms:g} ms")
    raised = sum(entry["count"] for entry in exceptions)
    if raised:
        violations.append(f"the load test itself raised {raised} exception(s): see locust.log")
    return violations


def summarize_run(
    run_dir: Path, run: dict, thresholds: Thresholds, expected_names: list[str] = ()
) -> RunSummary:
    """Reads the final statistics of one run folder and judges them."""
    request_types, total, errors, exceptions = read_final_stats(run_dir / FINAL_STATS_FILE)
    return RunSummary(
        run=run,
        request_types=request_types,
        total=total,
        errors=errors,
        exceptions=exceptions,
        thresholds=asdict(thresholds),
        violations=find_violations(request_types, total, thresholds, expected_names, exceptions),
    )


def load_summary(path: Path) -> RunSummary:
    """Reads back a summary.json written by write_summary (e.g. to compare two deployments)."""
    data = json.loads(Path(path).read_text())
    if data.get("schema") != SUMMARY_SCHEMA:
        raise ValueError(f"{path}: summary schema {data.get('schema')!r}, this code reads {SUMMARY_SCHEMA}")

    def stats(entry: dict) -> RequestTypeStats:
        entry = {k: v for k, v in entry.items() if k != "failure_ratio"}
        return RequestTypeStats(**entry)

    return RunSummary(
        run=data["run"],
        request_types=[stats(entry) for entry in data["request_types"]],
        total=stats(data["total"]),
        errors=data["errors"],
        exceptions=data["exceptions"],
        thresholds=data["thresholds"],
        violations=data["violations"],
    )


# ---------------------------------------------------------------------------------------------------
# Writing the summary


def _fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def stats_table(rows: list[RequestTypeStats], label_users: list[int] | None = None) -> list[str]:
    """Markdown table rows; with label_users, a leading "users" column (sweeps)."""
    head = "| request type | requests | failures | req/s | items/s | p50 ms | p95 ms | p99 ms | max ms |"
    rule = "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    if label_users is not None:
        head, rule = "| users " + head, "|---:" + rule
    lines = [head, rule]
    for index, stats in enumerate(rows):
        cells = [
            stats.name,
            str(stats.requests),
            str(stats.failures),
            _fmt(stats.requests_per_s),
            _fmt(stats.items_per_s),
            _fmt(stats.p50_ms, 0),
            _fmt(stats.p95_ms, 0),
            _fmt(stats.p99_ms, 0),
            _fmt(stats.max_ms, 0),
        ]
        if label_users is not None:
            cells.insert(0, str(label_users[index]))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _cell(text: str, limit: int = 300) -> str:
    """Text that stays inside one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")[:limit]


def _weights(weights: dict | None) -> str:
    return ", ".join(f"{name}={weight}" for name, weight in (weights or {}).items()) or "n/a"


def describe_thresholds(thresholds: dict) -> str:
    p99 = thresholds.get("max_p99_ms")
    p99_text = f"p99 at most {p99:g} ms" if p99 else "p99 not judged (no --max-p99-ms)"
    return f"failure ratio at most {thresholds.get('max_failure_ratio', 0):g}, {p99_text}"


def summary_markdown(summary: RunSummary) -> str:
    run = summary.run
    verdict = "PASSED" if summary.passed else "FAILED"
    lines = [
        f"# Load test {verdict}",
        "",
        f"- target: HTTP {run.get('http_url')}, gRPC {run.get('grpc_url')}",
        f"- users: {run.get('users')} (spawn rate {run.get('spawn_rate')}/s), run time {run.get('run_time')}",
        f"- protocol mix: {_weights(run.get('protocols'))}; request mix: {_weights(run.get('mix'))}",
        f"- digits: {run.get('digits', 'n/a')}",
        f"- started: {run.get('started_at')}",
        f"- thresholds: {describe_thresholds(summary.thresholds)}",
        "",
        *stats_table([*summary.request_types, summary.total]),
        "",
    ]
    if summary.violations:
        lines += ["## Thresholds broken", "", *[f"- {v}" for v in summary.violations], ""]
    if summary.errors:
        lines += ["## Errors", "", "| request type | occurrences | error |", "|---|---:|---|"]
        lines += [f"| {e['name']} | {e['occurrences']} | {_cell(e['error'])} |" for e in summary.errors]
        lines.append("")
    if summary.exceptions:
        lines += ["## Exceptions in the load test itself", ""]
        lines += [f"- {e['count']} x {_cell(e['message'])}" for e in summary.exceptions]
        lines.append("")
    return "\n".join(lines)


def write_summary(summary: RunSummary, out_dir: Path) -> tuple[Path, Path]:
    """Writes summary.json and summary.md into out_dir; returns their paths."""
    json_path, md_path = out_dir / "summary.json", out_dir / "summary.md"
    json_path.write_text(json.dumps(summary.to_dict(), indent=2) + "\n")
    md_path.write_text(summary_markdown(summary))
    return json_path, md_path


def console_lines(summary: RunSummary) -> list[str]:
    """The few lines `python -m loadtests` prints at the end of a run."""
    lines = [
        f"{s.name:<26} {s.requests:>8} req {s.failures:>6} fail {s.requests_per_s:>8.1f} req/s "
        f"p50 {_fmt(s.p50_ms, 0):>5} p95 {_fmt(s.p95_ms, 0):>5} p99 {_fmt(s.p99_ms, 0):>5} ms"
        for s in [*summary.request_types, summary.total]
    ]
    lines += [f"THRESHOLD BROKEN: {v}" for v in summary.violations]
    return lines


# ---------------------------------------------------------------------------------------------------
# Charts


def read_history(history_csv: Path) -> dict[str, dict[str, list[float]]]:
    """<prefix>_stats_history.csv (with --csv-full-history) as {name: {column: [values...]}}."""
    series: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    if not history_csv.is_file():
        return {}
    with history_csv.open(newline="") as handle:
        for row in csv.DictReader(handle):
            entry = series[report_name(row["Type"], row["Name"])]
            entry["t"].append(float(row["Timestamp"]))
            entry["users"].append(float(row["User Count"]))
            entry["rps"].append(_number(row["Requests/s"]) or 0.0)
            for key, column in PERCENTILES.items():
                value = _number(row[column])
                entry[key].append(math.nan if value is None else value)
    return series


def plot_run(history_csv: Path, out_png: Path, title: str) -> Path | None:
    """Throughput and latency over the run, one colour per request type; None when there is no history."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = read_history(history_csv)
    if not series:
        return None
    start = min(min(entry["t"]) for entry in series.values())
    figure, (ax_rps, ax_latency) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for name, entry in sorted(series.items()):
        t = [x - start for x in entry["t"]]
        is_total = name == TOTAL_NAME
        style = {"color": "black", "linewidth": 2} if is_total else {}
        (line,) = ax_rps.plot(t, entry["rps"], label=name, **style)
        if not is_total:  # the aggregate's percentiles mix unlike requests: only its throughput is shown
            ax_latency.plot(t, entry["p50_ms"], color=line.get_color(), label=f"{name} p50")
            ax_latency.plot(t, entry["p99_ms"], color=line.get_color(), linestyle="--", label=f"{name} p99")
    ax_rps.set_ylabel("requests/s")
    ax_rps.legend(fontsize="small", ncol=2)
    ax_rps.grid(alpha=0.3)
    ax_latency.set_ylabel("response time, ms (recent window)")
    ax_latency.set_xlabel("seconds since start")
    ax_latency.legend(fontsize="x-small", ncol=2)
    ax_latency.grid(alpha=0.3)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(out_png, dpi=90)
    plt.close(figure)
    return out_png


def plot_sweep(points: list[tuple[int, RunSummary]], out_png: Path, title: str) -> Path:
    """Requests/s and p99 against the number of users, one line per request type."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_name: dict[str, list[tuple[int, RequestTypeStats]]] = defaultdict(list)
    for users, summary in points:
        for stats in summary.request_types:
            by_name[stats.name].append((users, stats))
    figure, (ax_rps, ax_p99) = plt.subplots(1, 2, figsize=(11, 4.5))
    for name, entries in sorted(by_name.items()):
        entries.sort(key=lambda pair: pair[0])
        users = [u for u, _ in entries]
        ax_rps.plot(users, [s.requests_per_s for _, s in entries], marker="o", label=name)
        ax_p99.plot(users, [math.nan if s.p99_ms is None else s.p99_ms for _, s in entries], marker="o")
    user_counts = sorted({users for users, _ in points})
    for axis, label in ((ax_rps, "requests/s"), (ax_p99, "p99 response time, ms")):
        axis.set_xscale("log", base=2)
        axis.set_xticks(user_counts, [str(u) for u in user_counts])
        axis.minorticks_off()
        axis.set_ylim(bottom=0)
        axis.set_xlabel("concurrent users")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    ax_rps.legend(fontsize="small")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(out_png, dpi=90)
    plt.close(figure)
    return out_png
