"""The soak's figures from what was measured, with no server in reach: totals, requests per protocol and per
model, latency percentiles, memory drift, throughput windows, counter deltas, the verdict (page.py writes
them as the record, its page and its chart).

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
from dataclasses import dataclass

import numpy as np

from loadtests.soak.requests import MODELS, BadRequest
from loadtests.soak.workers import METRICS, Tally
from loadtests.workloads import PROTOCOLS

TRITON_COUNTING = (
    "Triton's statistics (and its Prometheus counters) count differently from users: a request refused "
    "inside an ensemble step counts twice in the ensemble's failures (the step and the ensemble); an error "
    "answered by a Python-backend model counts as a success of that model; a request refused before it "
    "reaches a model (shape, batch size, unknown model) counts nowhere. `failed` is the soak's own count: "
    "one refused request, one failure; `triton_failed_requests` is Triton's count with the ensemble's "
    "double count undone."
)


# ------------------------------------------------------------------------------------------ request counts


def weights_text(weights: dict[str, int]) -> str:
    return ", ".join(f"{name}={weight}" for name, weight in weights.items() if weight > 0)


def count_delta(before: dict, after: dict) -> dict[str, dict[str, int]]:
    """after - before per model; empty when the end could not be read."""
    if not after:
        return {}
    zero = {"success": 0, "fail": 0}
    return {
        model: {key: after[model][key] - before.get(model, zero)[key] for key in zero}
        for model in sorted(after)
    }


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


# ------------------------------------------------------------------------------------------ the figures


@dataclass
class Measured:
    """What one soak measured, handed over once every thread has stopped and the server was last read."""

    tally: Tally
    samples: list[dict]  # the sampler's
    load_seconds: float  # how long the load ran
    duration_s: float  # until every worker had stopped
    server: dict  # variant, triton_version
    alive: bool  # the server still ran at the end
    triton_counts: dict  # Triton's per-model counts over the run (count_delta); {} when not read at the end
    ensembles: list[str]
    memory_sampled: bool  # a server PID was known
    log_tail: str = ""  # the end of the log of a started server that died


def by_request(tally: Tally, bad: list[BadRequest]) -> list[dict]:
    """One row per protocol and model, then per protocol and kind of bad request (`ok` = refused clearly)."""
    rows = []
    for protocol in PROTOCOLS:
        for model in MODELS:
            key = (protocol, model)
            rows.append(
                {
                    "protocol": protocol,
                    "request": model,
                    "ok": tally.good_ok[key],
                    "failed": tally.good_failed[key],
                }
            )
        for label in sorted({b.label for b in bad}):
            key = (protocol, label)
            rows.append(
                {
                    "protocol": protocol,
                    "request": f"bad: {label}",
                    "ok": tally.bad_refused[key],
                    "failed": tally.bad_wrong[key],
                    "accepted": tally.bad_accepted[key],
                }
            )
    return rows


def violations(
    totals: dict, memory: dict, measured: Measured, bad_share: float, max_drift_mib: float
) -> list[str]:
    """What fails the soak: a good request failed, a bad one not refused cleanly, nothing sent, the server
    gone, or its memory grown beyond `max_drift_mib` (or not sampled enough to tell)."""
    found = []
    if totals["good_failed"]:
        found.append(f"{totals['good_failed']} good requests failed")
    if totals["bad_wrong"]:
        found.append(f"{totals['bad_wrong']} bad requests were accepted or refused unclearly")
    if totals["good_ok"] == 0:
        found.append("no good request succeeded")
    if bad_share > 0 and totals["bad_refused"] == 0:
        found.append("no bad request was sent and refused")
    if not measured.alive:
        found.append("the server exited during the soak")
    drift = memory["total_rss"]
    if drift is not None and drift["drift_mib"] > max_drift_mib:
        found.append(f"server memory drift {drift['drift_mib']} MiB > {max_drift_mib} MiB")
    if measured.memory_sampled and drift is None:
        found.append("too few memory samples after the warm-up to judge the drift (run longer)")
    return found


def soak_figures(name: str, config: dict, measured: Measured, bad: list[BadRequest]) -> dict:
    """The record's figures. `config`: the soak's settings (workers, bad_share, sample_interval_s, warmup_s,
    max_drift_mib, seed, what was sent)."""
    tally = measured.tally
    totals = tally.totals()
    totals["requests_per_s"] = round(sum(totals.values()) / max(measured.duration_s, 1e-9), 2)
    memory = {
        "server_rss": memory_drift(measured.samples, config["warmup_s"], "server_rss_mib"),
        "total_rss": memory_drift(measured.samples, config["warmup_s"], "total_rss_mib"),
    }
    rows = by_request(tally, bad)
    found = violations(totals, memory, measured, config["bad_share"], config["max_drift_mib"])
    return {
        "name": name,
        "duration_s": round(measured.duration_s, 1),
        "config": config,
        "server": {**measured.server, "alive_at_end": measured.alive},
        "passed": not found,
        "violations": found,
        "totals": totals,
        "by_request": rows,
        "requests_by_model": requests_by_model(
            rows, {b.label: b.model for b in bad}, measured.triton_counts, measured.ensembles
        ),
        "triton_counting": TRITON_COUNTING,
        "latency": {model: percentiles(values) for model, values in tally.latencies.items()},
        "memory": memory,
        "metrics_delta": metric_deltas(measured.samples, METRICS),
        "throughput": throughput_series(tally.events, config["sample_interval_s"], measured.load_seconds),
        "samples": measured.samples,
        "failures": tally.failures,
        "server_log_tail": measured.log_tail,
    }
