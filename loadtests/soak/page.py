"""The soak's record as files and lines, from its figures (report.py) alone: NAME.json, the page NAME.md, the
chart NAME.png, and the lines the console prints at the end."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from loadtests.record import Record, write_record
from loadtests.soak.report import TRITON_COUNTING


def write_results(record: Record, out: Path) -> Path:
    """out/NAME.json (the record), NAME.md (its page), NAME.png (the chart); returns the JSON's path."""
    name = record.figures["name"]
    json_path, _ = write_record(record, out / f"{name}.json", markdown(record))
    write_chart(out / f"{name}.png", record.figures)
    return json_path


def summary_lines(record: Record, json_path: Path) -> list[str]:
    """What the console says at the end: the verdict and totals, what failed, the first failures."""
    f = record.figures
    totals, drift = f["totals"], f["memory"]["total_rss"]
    return [
        f"soak: {'PASS' if f['passed'] else 'FAIL'} — good ok {totals['good_ok']}, good failed "
        f"{totals['good_failed']}, bad refused {totals['bad_refused']}, bad wrong {totals['bad_wrong']}, "
        f"{totals['requests_per_s']:.1f} req/s, memory drift "
        f"{drift['drift_mib'] if drift else 'n/a'} MiB; results in {json_path.with_suffix('.*')}",
        *[f"soak: FAIL {violation}" for violation in f["violations"]],
        *[f"soak:   {failure}" for failure in f["failures"][:10]],
    ]


def write_chart(path: Path, result: dict) -> None:
    import matplotlib  # noqa: PLC0415 - only needed for the chart

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    series = result["throughput"]
    samples = result["samples"]
    figure, axes = plt.subplots(3, 1, figsize=(10, 10), sharex=True)
    t = [s["t_end"] for s in series]
    axes[0].plot(t, [s["good_rps"] for s in series], label="good requests/s")
    axes[0].plot(t, [s["bad_rps"] for s in series], label="bad requests/s (refused)")
    failed_t = [s["t_end"] for s in series if s["good_failed"]]
    if failed_t:
        axes[0].scatter(failed_t, [0] * len(failed_t), color="red", marker="x", label="good requests failed")
    axes[0].set_ylabel("requests / s")
    axes[0].legend(loc="lower right")
    axes[0].set_title(
        f"Soak {result['name']}: {result['duration_s']:.0f} s, {result['config']['workers']} workers, "
        f"{result['server']['variant']} server — good failed: {result['totals']['good_failed']}, "
        f"bad not refused cleanly: {result['totals']['bad_wrong']}"
    )
    warmup = result["config"]["warmup_s"]
    spread = [5.0]
    for key, label in (("server_rss_mib", "tritonserver"), ("total_rss_mib", "with child processes")):
        points = [(s["t"], s[key]) for s in samples if key in s]
        settled = [v for t, v in points if t >= warmup]
        if not settled:
            continue
        # Relative to the mean after the warm-up, so that a drift of a few MiB is visible next to ~300 MiB.
        base = float(np.mean(settled))
        spread.append(max(abs(v - base) for v in settled) + 2.0)
        axes[1].plot(
            [t for t, _ in points], [v - base for _, v in points], label=f"{label} (mean {base:.1f} MiB)"
        )
    axes[1].axvline(warmup, color="grey", linestyle=":", label="end of warm-up")
    axes[1].set_ylim(-max(spread), max(spread))  # fits the samples after the warm-up (start-up is lower)
    axes[1].set_ylabel("RSS - mean after warm-up (MiB)")
    axes[1].legend(loc="lower right")
    latency = [(s["t_end"], s["good_p95_ms"]) for s in series if s["good_p95_ms"] is not None]
    axes[2].plot(
        [t for t, _ in latency], [p for _, p in latency], label="p95 latency of good requests per window"
    )
    axes[2].set_ylabel("ms")
    axes[2].set_xlabel("seconds since start")
    axes[2].legend(loc="upper right")
    for axis in axes:
        axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def requests_by_model_lines(result: dict) -> list[str]:
    """The per-model counts, the soak's (how users count) beside Triton's (how Triton counts)."""
    counts = result.get("requests_by_model") or {}
    lines = [
        "Requests by model, counted as users count them (one refused request is one failure), and as Triton",
        "counts them over the same run (statistics API):",
        "",
        "| model | requests | answered | failed | of which bad on purpose | Triton success | Triton fail "
        "| Triton's failed requests |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for model, c in counts.items():
        triton = [
            str(c[k]) if k in c else "n/a"
            for k in ("triton_success", "triton_fail", "triton_failed_requests")
        ]
        if c.get("ensemble") and "triton_fail" in c:
            triton[2] += " (fail / 2: ensemble)"
        lines.append(
            f"| {model} | {c['requests']} | {c['answered']} | {c['failed']} | {c['refused_on_purpose']} | "
            + " | ".join(triton)
            + " |"
        )
    lines += ["", result.get("triton_counting", TRITON_COUNTING), ""]
    deltas = result.get("metrics_delta") or {}
    if deltas:
        lines += [
            "Triton's Prometheus counters between the first and the last sample (Triton's counting, above):",
            "",
        ]
        for name, per_model in deltas.items():
            lines.append(f"- `{name}`: " + ", ".join(f"{m} +{v:.0f}" for m, v in per_model.items()))
    return lines


def markdown(record: Record) -> str:
    """The record's page."""
    result = record.figures
    totals = result["totals"]
    drift = result["memory"].get("total_rss") or {}
    lines = [
        f"# Serving soak {result['name']}",
        "",
        f"Result: **{'PASS' if result['passed'] else 'FAIL'}**"
        + ("" if result["passed"] else " — " + "; ".join(result["violations"])),
        "",
        *([f"**Note.** {result['note']}", ""] if result.get("note") else []),
        f"- ran {result['duration_s']:.0f} s, "
        f"{result['config']['workers']} client threads"
        + (f" at {rate:g} requests/s" if (rate := result["config"].get("rate_per_s")) else "")
        + f", {result['config']['bad_share']:.0%} bad requests, "
        f"seed {result['config']['seed']}",
        *record.head_lines(),
        "",
        "| | count |",
        "|---|---:|",
        f"| good requests answered correctly | {totals['good_ok']} |",
        f"| good requests failed | {totals['good_failed']} |",
        f"| bad requests refused with a clear error | {totals['bad_refused']} |",
        f"| bad requests accepted or refused unclearly | {totals['bad_wrong']} |",
        f"| mean throughput (all requests) | {totals['requests_per_s']:.1f} /s |",
        "",
        "Memory of the server (resident set of tritonserver and its child processes, MiB; drift = mean "
        "of the last third minus mean of the first third of the samples after the "
        f"{result['config']['warmup_s']:.0f} s warm-up):",
        "",
        "| | first third | last third | drift | min | max | samples |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key, label in (("server_rss", "tritonserver"), ("total_rss", "with children")):
        m = result["memory"].get(key)
        if m:
            lines.append(
                f"| {label} | {m['first_third_mib']} | {m['last_third_mib']} | {m['drift_mib']} "
                f"| {m['min_mib']} | {m['max_mib']} | {m['samples']} |"
            )
    if not drift:
        lines.append("| (not sampled) | | | | | | |")
    lines += [
        "",
        "Latency of good requests by model (ms):",
        "",
        "| model | p50 | p95 | p99 | max |",
        "|---|---:|---:|---:|---:|",
    ]
    for model, p in sorted(result["latency"].items()):
        lines.append(f"| {model} | {p['p50_ms']} | {p['p95_ms']} | {p['p99_ms']} | {p['max_ms']} |")
    lines += [
        "",
        "Requests by protocol and model / bad-request kind:",
        "",
        "| protocol | request | ok | failed |",
        "|---|---|---:|---:|",
    ]
    for row in result["by_request"]:
        lines.append(f"| {row['protocol']} | {row['request']} | {row['ok']} | {row['failed']} |")
    lines += ["", *requests_by_model_lines(result)]
    if result["failures"]:
        lines += ["", "First failures:", ""] + [f"- {f}" for f in result["failures"][:20]]
    lines += ["", f"![throughput, memory and latency over time]({result['name']}.png)", ""]
    return "\n".join(lines)
