"""The benchmark's copy at each case's own size (cli.measure_same_size_copy, report.same_size_copy_markdown):
which cases get one, the bytes copied, and the table the H200 record (records/benchmarks/rms-norm-h200.json)
renders. The copy itself runs on a GPU (libplugin_bench.so's tpk_bench_copy); here a stand-in library answers
with fixed timings so that the selection and the arithmetic are checked on any CPU."""

from __future__ import annotations

import json
from types import SimpleNamespace

from trt_plugin_kit.benchmarks.cases import build_cases
from trt_plugin_kit.benchmarks.cli import SAME_SIZE_COPY_KERNELS, case_record, measure_same_size_copy
from trt_plugin_kit.benchmarks.library import BenchError
from trt_plugin_kit.benchmarks.report import markdown
from trt_plugin_kit.interface import REPO_ROOT

RECORD = REPO_ROOT / "records" / "benchmarks" / "rms-norm-h200.json"
ARGS = SimpleNamespace(repetitions=200)


class CopyOnly:
    """Answers tpk_bench_copy as a GPU copying at 2,000 GB/s would (vector:0:1 at 2,200; or fails), and notes
    what it was asked."""

    def __init__(self, fail: bool = False):
        self.asked: list[tuple[int, str]] = []
        self.fail = fail

    def copy(self, nbytes: int, repetitions: int, options: str) -> dict:
        kernel = options.rpartition("copy_kernel=")[2]
        self.asked.append((nbytes, kernel))
        if self.fail:
            raise BenchError("no device")
        gb_per_s = 2200e9 if kernel == "vector:0:1" else 2000e9
        return {"median_us": 2 * nbytes / gb_per_s * 1e6, "p10_us": None, "p90_us": None}


def rms_case(case_id: str):
    return next(c for c in build_cases() if c.id == case_id)


def test_a_roofline_case_gets_a_copy_of_half_its_bytes_moved():
    case = rms_case("rms_norm/fp16/4096x8192")
    rec = case_record(case)
    rec["plugin_result"] = {"median_us": 40.0, "gb_per_s": case.bytes_moved / 40e-6 / 1e9}
    lib = CopyOnly()
    line = measure_same_size_copy(lib, case, rec, ARGS, "", copy_gbps=4000.0)
    half = case.bytes_moved // 2 // 256 * 256
    assert lib.asked == [(half, "memcpy")] + [(half, k) for k in SAME_SIZE_COPY_KERNELS]
    copy = rec["same_size_copy"]
    assert abs(copy["gb_per_s"] - 2000.0) < 1.0 and abs(copy["pct_copy"] - 50.0) < 0.1
    assert abs(copy["plugin_pct"] - 100.0 * rec["plugin_result"]["gb_per_s"] / copy["gb_per_s"]) < 1e-9
    best = rec["best_same_size_copy"]  # the fastest of cudaMemcpyAsync and the kernels
    assert best["kernel"] == "vector:0:1" and abs(best["gb_per_s"] - 2200.0) < 1.0
    assert abs(best["plugin_pct"] - 100.0 * rec["plugin_result"]["gb_per_s"] / 2200.0) < 1e-6
    assert "same-size copy" in line and "best same-size copy vector:0:1" in line


def test_a_case_without_a_copy_target_or_result_gets_none():
    serving = rms_case("mnist/b1/rms_norm/fp32/49x64")
    rec = case_record(serving)
    rec["plugin_result"] = {"median_us": 2.0, "gb_per_s": 10.0}
    lib = CopyOnly()
    assert measure_same_size_copy(lib, serving, rec, ARGS, "", 4000.0) == ""
    large = rms_case("rms_norm/fp32/4096x8192")
    failed = case_record(large)  # the plugin errored: nothing to compare with
    assert measure_same_size_copy(lib, large, failed, ARGS, "", 4000.0) == ""
    assert lib.asked == [] and rec["same_size_copy"] is None and failed["same_size_copy"] is None


def test_a_failed_copy_is_recorded_with_its_reason():
    case = rms_case("rms_norm/bf16/65536x1024")
    rec = case_record(case)
    rec["plugin_result"] = {"median_us": 70.0, "gb_per_s": 3800.0}
    line = measure_same_size_copy(CopyOnly(fail=True), case, rec, ARGS, "", 4000.0)
    assert rec["same_size_copy"]["error"] == "no device" and "ERROR no device" in line
    assert all(c["error"] == "no device" for c in rec["same_size_copy_kernels"])
    assert rec["best_same_size_copy"] is None


def test_the_h200_record_tabulates_each_roofline_case_beside_its_copy():
    report = json.loads(RECORD.read_text())
    text = markdown(report)
    section = text.split("## Copy bandwidth at each case's size", 1)[1].split("\n## ", 1)[0]
    summary, every_copy = section.split("Every same-size copy", 1)
    rows = [line for line in summary.splitlines() if line.startswith("| `")]
    with_copy = [c for c in report["cases"] if c.get("same_size_copy")]
    assert [row.split("`")[1] for row in rows] == [c["id"] for c in with_copy]
    assert {c["id"].split("/")[0] for c in with_copy} == {"rms_norm"}  # the serving sizes have none
    for row, c in zip(rows, with_copy, strict=True):
        copy, best = c["same_size_copy"], c["best_same_size_copy"]
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        assert cells[4] == f"{copy['median_us']:,.2f}" and cells[5] == f"{copy['pct_copy']:,.1f}%"
        assert cells[3] in ("PASS", "FAIL")
        # the best same-size copy is the fastest of all timed, cudaMemcpyAsync among them
        timed = [copy, *c["same_size_copy_kernels"]]
        assert best["gb_per_s"] == max(t.get("gb_per_s") or 0 for t in timed)
        assert cells[7] == f"`{best['kernel']}`" and cells[9] == f"{best['pct_copy']:,.1f}%"
    # and every copy's GB/s, one row a case
    assert [line.split("`")[1] for line in every_copy.splitlines() if line.startswith("| `")] == [
        c["id"] for c in with_copy
    ]


def test_a_record_without_same_size_copies_has_no_such_section():
    report = json.loads(RECORD.read_text())
    for c in report["cases"]:
        c.pop("same_size_copy", None)
    assert "Copy bandwidth at each case's size" not in markdown(report)
