"""The soak's measurements and results (loadtests/soak.py): the server's memory and Prometheus counters,
latency percentiles, memory drift, throughput windows, request counts by model (the soak's own and
Triton's, side by side), and the JSON record's Markdown page and chart.

How Triton counts (tritonserver 2.51, tested in tests/server/test_soak.py), and why the soak counts
for itself:
- a request refused inside an ensemble step counts twice in the ensemble's failure counter (the statistics
  API's `fail` and Prometheus' nv_inference_request_failure): once for the step, once for the ensemble;
- an error answered by a Python-backend model (mnist_preprocess, the CPU mnist/l2norm) counts as a success of
  that model;
- a request refused before it reaches a model (wrong shape, batch above max_batch_size, unknown model)
  counts nowhere.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from trt_plugin_kit.interface import MODEL_NAMES
from trt_plugin_kit.triton.options import ServerLocation
from trt_plugin_kit.triton.protocol import client_module

TRITON_COUNTING = (
    "Triton's statistics (and its Prometheus counters) count differently from users: a request refused "
    "inside an ensemble step counts twice in the ensemble's failures (the step and the ensemble); an error "
    "answered by a Python-backend model counts as a success of that model; a request refused before it "
    "reaches a model (shape, batch size, unknown model) counts nowhere. `failed` is the soak's own count: "
    "one refused request, one failure; `triton_failed_requests` is Triton's count with the ensemble's "
    "double count undone."
)


# ------------------------------------------------------------------------------------ server measurements


def process_tree_rss(pid: int) -> tuple[float, float, int] | None:
    """(RSS of pid, RSS of pid and all its descendants, number of processes) in bytes, or None if gone."""
    try:
        import psutil  # noqa: PLC0415 - optional

        try:
            root = psutil.Process(pid)
            processes = [root, *root.children(recursive=True)]
            rss = []
            for process in processes:
                try:
                    rss.append(process.memory_info().rss)
                except psutil.NoSuchProcess:
                    rss.append(0)
            return float(rss[0]), float(sum(rss)), len(processes)
        except psutil.NoSuchProcess:
            return None
    except ImportError:
        pass

    def rss_of(p: int) -> float:
        with open(f"/proc/{p}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return float(line.split()[1]) * 1024.0
        return 0.0

    def children(p: int) -> list[int]:
        found = []
        for task in Path(f"/proc/{p}/task").glob("*"):
            text = (task / "children").read_text().split() if (task / "children").exists() else []
            found += [int(c) for c in text]
        return found

    try:
        tree, queue = [], [pid]
        while queue:
            current = queue.pop()
            tree.append(current)
            queue += children(current)
        sizes = [rss_of(p) for p in tree]
        return sizes[0], sum(sizes), len(tree)
    except OSError:
        return None


# ------------------------------------------------------------------------------------------ request counts


def weights_text(weights: dict[str, int]) -> str:
    return ", ".join(f"{name}={weight}" for name, weight in weights.items() if weight > 0)


def triton_request_counts(location: ServerLocation) -> dict[str, dict[str, int]]:
    """{model: {"success", "fail"}} from Triton's statistics API (cumulative since the server started)."""
    client = client_module("http").InferenceServerClient(location.address("http"))
    try:
        statistics = client.get_inference_statistics()
    finally:
        client.close()
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"success": 0, "fail": 0})
    for entry in statistics.get("model_stats", []):
        stats = entry.get("inference_stats", {})
        counts[entry["name"]]["success"] += int(stats.get("success", {}).get("count", 0))
        counts[entry["name"]]["fail"] += int(stats.get("fail", {}).get("count", 0))
    return dict(counts)


def count_delta(before: dict, after: dict) -> dict[str, dict[str, int]]:
    """after - before per model; empty when the end could not be read."""
    if not after:
        return {}
    zero = {"success": 0, "fail": 0}
    return {
        model: {key: after[model][key] - before.get(model, zero)[key] for key in zero}
        for model in sorted(after)
    }


def ensemble_models(location: ServerLocation) -> list[str]:
    """The served models of this kit whose platform is "ensemble" (their failures count twice)."""
    client = client_module("http").InferenceServerClient(location.address("http"))
    try:
        return [name for name in MODEL_NAMES if client.get_model_config(name).get("platform") == "ensemble"]
    finally:
        client.close()


def requests_by_model(
    by_request: list[dict], bad_targets: dict[str, str], triton: dict, ensembles: list[str]
) -> dict[str, dict]:
    """Requests per model as users count them (sent, answered, failed: one refused request is one failure),
    next to Triton's counts over the same run and Triton's failures with the ensemble double count undone."""
    counts: dict[str, dict] = defaultdict(
        lambda: dict.fromkeys(("requests", "answered", "failed", "refused_on_purpose"), 0)
    )
    for row in by_request:
        if row["request"].startswith("bad: "):
            entry = counts[bad_targets[row["request"].removeprefix("bad: ")]]
            accepted = row.get("accepted", 0)
            entry["requests"] += row["ok"] + row["failed"]
            entry["answered"] += accepted
            entry["failed"] += row["ok"] + row["failed"] - accepted
            entry["refused_on_purpose"] += row["ok"]
        else:
            entry = counts[row["request"]]
            entry["requests"] += row["ok"] + row["failed"]
            entry["answered"] += row["ok"]
            entry["failed"] += row["failed"]
    for model in set(triton) | set(counts):
        entry = counts[model]
        if model in triton:
            entry["triton_success"] = triton[model]["success"]
            entry["triton_fail"] = triton[model]["fail"]
            entry["triton_failed_requests"] = triton[model]["fail"] // (2 if model in ensembles else 1)
        entry["ensemble"] = model in ensembles
    return {model: counts[model] for model in sorted(counts)}


# ------------------------------------------------------------------------------------------ results


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    array = np.array(values) * 1000.0
    return {
        "p50_ms": round(float(np.percentile(array, 50)), 2),
        "p95_ms": round(float(np.percentile(array, 95)), 2),
        "p99_ms": round(float(np.percentile(array, 99)), 2),
        "max_ms": round(float(array.max()), 2),
    }


def memory_drift(samples: list[dict], warmup: float, key: str) -> dict | None:
    """Mean of the last third minus mean of the first third of the samples taken after the warm-up."""
    values = [(s["t"], s[key]) for s in samples if key in s and s["t"] >= warmup]
    if len(values) < 3:
        return None
    third = len(values) // 3
    first = float(np.mean([v for _, v in values[:third]]))
    last = float(np.mean([v for _, v in values[-third:]]))
    return {
        "first_third_mib": round(first, 2),
        "last_third_mib": round(last, 2),
        "drift_mib": round(last - first, 2),
        "min_mib": round(min(v for _, v in values), 2),
        "max_mib": round(max(v for _, v in values), 2),
        "samples": len(values),
    }


def throughput_series(events: list, interval: float, duration: float) -> list[dict]:
    """Per window of `interval` seconds: good and bad requests per second, good failures, p95 latency.

    The last window absorbs the remainder of `duration` and the requests still in flight at the end."""
    bins = max(1, int(round(duration / interval)))
    good = np.zeros(bins)
    bad = np.zeros(bins)
    failed = np.zeros(bins)
    latencies: list[list[float]] = [[] for _ in range(bins)]
    for t, is_good, ok, seconds in events:
        i = min(int(t // interval), bins - 1)
        if is_good:
            good[i] += 1
            failed[i] += 0 if ok else 1
            if ok:
                latencies[i].append(seconds)
        else:
            bad[i] += 1
    series = []
    for i in range(bins):
        end = duration if i == bins - 1 else (i + 1) * interval
        width = max(end - i * interval, 1e-9)
        series.append(
            {
                "t_end": round(end, 1),
                "good_rps": round(good[i] / width, 2),
                "bad_rps": round(bad[i] / width, 2),
                "good_failed": int(failed[i]),
                "good_p95_ms": round(float(np.percentile(latencies[i], 95)) * 1000.0, 2)
                if latencies[i]
                else None,
            }
        )
    return series


def metric_deltas(samples: list[dict], metrics: tuple[str, ...]) -> dict:
    """Increase of each Prometheus counter per model between the first and the last sample."""
    with_metrics = [s["metrics"] for s in samples if "metrics" in s]
    if len(with_metrics) < 2:
        return {}
    first, last = with_metrics[0], with_metrics[-1]
    deltas = {}
    for name in metrics:
        models = set(first.get(name, {})) | set(last.get(name, {}))
        deltas[name] = {
            m: last.get(name, {}).get(m, 0.0) - first.get(name, {}).get(m, 0.0) for m in sorted(models)
        }
    return deltas


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


def markdown(result: dict) -> str:
    totals = result["totals"]
    drift = result["memory"].get("total_rss") or {}
    lines = [
        f"# Serving soak {result['name']}",
        "",
        f"Result: **{'PASS' if result['passed'] else 'FAIL'}**"
        + ("" if result["passed"] else " — " + "; ".join(result["violations"])),
        "",
        *([f"**Note.** {result['note']}", ""] if result.get("note") else []),
        f"- started {result['started']}, ran {result['duration_s']:.0f} s, "
        f"{result['config']['workers']} client threads, {result['config']['bad_share']:.0%} bad requests, "
        f"seed {result['config']['seed']}",
        f"- server: {result['server']['description']}",
        f"- client host: {result['host']['cpus']} CPUs, {result['host']['platform']}",
        f"- command: `{result['command']}`",
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
