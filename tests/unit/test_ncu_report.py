"""scripts/gpu_ncu.sh's report (trt_plugin_kit/benchmarks/ncu.py) and the benchmark report's links to it:
the bound and occupancy limiter derived, every default case a benchmark case, the links pointing at the
headings GitHub makes of the case ids."""

from __future__ import annotations

import json
import re

from trt_plugin_kit.benchmarks import ncu
from trt_plugin_kit.benchmarks.cases import build_cases
from trt_plugin_kit.benchmarks.report import markdown, profile_links
from trt_plugin_kit.interface import REPO_ROOT


def test_every_default_case_is_a_benchmark_case():
    ids = {case.id for case in build_cases()}
    assert set(ncu.DEFAULT_CASES) <= ids
    plugins = {ncu.case_by_id(case_id).plugin for case_id in ncu.DEFAULT_CASES}
    assert plugins == {case.plugin for case in build_cases()}  # every plugin profiled


def test_anchor_is_github_s():
    # GitHub: lower case, punctuation but '-' and '_' dropped, spaces to '-'.
    assert ncu.case_anchor("fc/fp32/4096x800->500") == "fcfp324096x800-500"
    assert ncu.case_anchor("mnist/b64/pool1/max/fp32/64x20x24x24") == "mnistb64pool1maxfp3264x20x24x24"


def kernel(**values) -> dict:
    base = dict.fromkeys(ncu.METRICS, None)
    return ncu.derive({"kernel": "k", **base, **values})


def test_bound_follows_the_speed_of_light_rule():
    assert kernel(memory_pct=92.0, compute_pct=30.0)["bound"] == "memory"
    assert kernel(memory_pct=40.0, compute_pct=75.0)["bound"] == "compute"
    assert kernel(memory_pct=20.0, compute_pct=10.0)["bound"].startswith("latency")
    limited = kernel(limit_registers=8.0, limit_shared_mem=32.0, limit_warps=8.0, limit_blocks=32.0)
    assert limited["occupancy_limiter"] == "registers/warps (8 blocks/SM)"
    peak = kernel(dram_peak_bytes_per_cycle=4096.0, dram_cycles_per_s=1.2e9, dram_bytes_per_s=4.0e12)
    assert round(peak["dram_peak_gb_per_s"]) == 4915 and peak["dram_gb_per_s"] == 4000.0


def test_benchmark_report_links_profiled_cases(tmp_path):
    (tmp_path / "ncu").mkdir()
    case = "fc/fp32/4096x800->500"
    cases = [{"id": case, "anchor": ncu.case_anchor(case), "kernels": [{}]}, {"id": "x", "error": "no"}]
    (tmp_path / "ncu" / "ncu.json").write_text(json.dumps({"cases": cases}))
    links = profile_links(tmp_path / "benchmarks")
    assert links == {case: "../ncu/ncu.md#fcfp324096x800-500"}  # a case that failed gets no link
    report = json.loads((REPO_ROOT / "records" / "benchmarks" / "benchmark.json").read_text())
    text = markdown(report, links)
    assert f"| `{case}` ([ncu](../ncu/ncu.md#fcfp324096x800-500)) |" in text
    assert len(re.findall(r"\(\[ncu\]", text)) == 1


def test_the_h200_record_reads_back():
    # records/ncu/: ncu's own raw CSV of the GPU run, read by the code that wrote ncu.json, gives its numbers,
    # and ncu saw every kernel inside its enqueue's NVTX range (the build option at work).
    records = REPO_ROOT / "records" / "ncu"
    report = json.loads((records / "ncu.json").read_text())
    # Issue 43's plugins came after this run: profiled in a run of their own (records/ncu/transformer-h200/).
    not_yet_profiled = {"RmsNormLastAxis", "FlashAttentionTriton"}
    assert {c["plugin"] for c in report["cases"]} == {
        case.plugin for case in build_cases()
    } - not_yet_profiled
    for case in report["cases"]:
        kernels = ncu.read_kernels(records / f"{case['id'].replace('/', '_').replace('>', '')}.csv")
        assert kernels == case["kernels"], case["id"]
        assert {k["nvtx"] for k in kernels} == {f"trt_plugin_kit:{case['plugin']} tactic {case['tactic']}"}
        assert all(k["duration_ns"] > 0 and k["occupancy_limiter"] for k in kernels), case["id"]
    by_id = {c["id"]: c["kernels"][0] for c in report["cases"]}
    assert by_id["prelu/fp32/256x64x112x112"]["bound"] == "memory"
    assert by_id["fc/fp32/4096x800->500"]["bound"] == "compute"
