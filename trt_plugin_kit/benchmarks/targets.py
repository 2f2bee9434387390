"""Derived metrics (GB/s, % of copy, TFLOP/s), speed ratios and the PASS/FAIL of every target."""

from __future__ import annotations

from trt_plugin_kit.benchmarks.cases import Case


def derive(stats: dict, case_bytes: int, flops: int, copy_gbps: float | None) -> dict:
    """GB/s, % of the copy bandwidth and TFLOP/s of a measurement (median)."""
    out = dict(stats)
    median = stats.get("median_us")
    if median and median > 0:
        out["gb_per_s"] = case_bytes / (median * 1e-6) / 1e9
        out["pct_copy"] = 100.0 * out["gb_per_s"] / copy_gbps if copy_gbps else None
        out["tflops"] = flops / (median * 1e-6) / 1e12 if flops else None
    return out


def attach_comparisons(records: dict[str, dict], cases: list[Case]) -> None:
    """Speed ratios (peer time / plugin time) of the PyTorch peers and of our own compared cases."""
    for case in cases:
        rec = records.get(case.id)
        if not rec or not rec.get("plugin_result"):
            continue
        mine = rec["plugin_result"]["median_us"]
        for peer in rec["peers"]:
            if peer.get("median_us"):
                peer["speed_ratio"] = peer["median_us"] / mine
        rec["versus"] = []
        for other_id in case.versus:
            other = records.get(other_id, {}).get("plugin_result")
            if other and other.get("median_us"):
                entry = {"name": f"our {other_id.split('/')[-2].upper()} Pool", "case": other_id}
                entry.update({k: other[k] for k in ("median_us", "p10_us", "p90_us", "gb_per_s", "pct_copy")})
                entry["speed_ratio"] = other["median_us"] / mine
                rec["versus"].append(entry)


def evaluate_targets(records: dict[str, dict], cases: list[Case]) -> list[dict]:
    rows = []
    for case in cases:
        rec = records.get(case.id, {})
        mine = rec.get("plugin_result") or {}
        for t in case.targets:
            value = None
            if t.metric == "pct_copy":
                value = mine.get("pct_copy")
            elif t.metric == "median_us":
                value = mine.get("median_us")
            elif t.metric == "speed_ratio":
                value = next(
                    (p.get("speed_ratio") for p in rec.get("peers", []) if p["name"] == t.peer), None
                )
            elif t.metric == "speedup_vs":
                other = records.get(t.versus, {}).get("plugin_result") or {}
                if other.get("median_us") and mine.get("median_us"):
                    value = other["median_us"] / mine["median_us"]
            if value is None:
                status = "NOT MEASURED"
            elif (t.op == ">=" and value >= t.threshold) or (t.op == "<=" and value <= t.threshold):
                status = "PASS"
            else:
                status = "FAIL"
            rows.append(
                {
                    "target": t.name,
                    "case": case.id,
                    "metric": t.metric,
                    "op": t.op,
                    "threshold": t.threshold,
                    "value": value,
                    "status": status,
                    "versus": t.versus,
                    "peer": t.peer,
                }
            )
    return rows
