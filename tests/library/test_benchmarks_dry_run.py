"""trt_plugin_kit.benchmarks without a GPU: the --dry-run mode CI runs, argument checks, the case list against
the roofline round, and the evaluation/report code fed by a stand-in for libplugin_bench.so.

With a built libplugin_bench.so (``make test`` builds it into build/trt-<version>; or set
TPK_BENCH_BUILD_DIR), the dry run also drives every case through the plugins' build-phase calls.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trt_plugin_kit.benchmarks import cli, lenet_chain
from trt_plugin_kit.benchmarks.cases import (
    ATTENTION_LONG_RATIO,
    FAMILY_ORDER,
    MNIST_BATCHES,
    PEER_RATIO,
    build_cases,
    build_chains,
    select_cases,
)
from trt_plugin_kit.benchmarks.library import (
    BENCH_LIBRARY,
    PLUGIN_LIBRARY,
    RESULT_FIELDS,
    BenchError,
    parse_tactic_timings,
)
from trt_plugin_kit.benchmarks.peers import rotation_sets, time_boxed
from trt_plugin_kit.benchmarks.report import tactics_markdown
from trt_plugin_kit.interface import REPO_ROOT

ENTRY = "trt_plugin_kit.benchmarks"  # python3 -m trt_plugin_kit.benchmarks

# Runs the package's __main__ with any import of torch refused, then checks that none happened.
NO_TORCH_RUNNER = """
import importlib.abc, runpy, sys
class RefuseTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("the dry run must not import torch")
        return None
sys.meta_path.insert(0, RefuseTorch())
sys.argv = [sys.argv[1], *sys.argv[2:]]
try:
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
finally:
    assert "torch" not in sys.modules
"""


def run_dry(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", NO_TORCH_RUNNER, ENTRY, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )


def built_library_dirs() -> list[Path]:
    candidates = [os.environ.get("TPK_BENCH_BUILD_DIR", "")]
    candidates += [str(p) for p in sorted((REPO_ROOT / "build").glob("trt-*"))]
    candidates.append(str(REPO_ROOT / "build" / "bench"))
    return [
        Path(c)
        for c in candidates
        if c and (Path(c) / BENCH_LIBRARY).is_file() and (Path(c) / PLUGIN_LIBRARY).is_file()
    ]


# ------------------------------------------------------------------------------------------- dry run
def test_dry_run_lists_every_case_without_gpu_or_torch():
    result = run_dry("--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    cases = build_cases()
    assert f"{len(cases)} cases" in result.stdout
    for case in cases:
        assert case.id in result.stdout
    assert "plugin-side validation skipped" in result.stdout


def test_dry_run_quick_and_only_filters():
    result = run_dry("--dry-run", "--quick")
    assert result.returncode == 0, result.stderr
    # the INT8 pool's comparison cases come along
    assert "pool/max/fp16/256x64x112x112" in result.stdout
    result = run_dry("--dry-run", "--only", "mnist/b1/,fc/fp16")
    assert result.returncode == 0, result.stderr
    listed = [line.split()[0] for line in result.stdout.splitlines()[2:] if line.startswith(("mnist", "fc"))]
    assert listed and all(i.startswith("mnist/b1/") or "fc/fp16" in i for i in listed)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--repetitions", "50"], "--repetitions must be >= 100"),
        (["--only", "no-such-case"], "no case matches"),
        (["--spin-us", "-1"], "--spin-us"),
        (["--max-sets", "1"], "--max-sets"),
        (["--copy-gib", "100"], "--copy-gib"),
        (["--build-dir", "/nonexistent/build"], "does not exist"),
    ],
)
def test_dry_run_rejects_bad_arguments(args, message):
    result = run_dry("--dry-run", *args)
    assert result.returncode == 2
    assert message in result.stderr


@pytest.mark.skipif(not built_library_dirs(), reason="libplugin_bench.so not built (make plugins)")
def test_dry_run_drives_every_case_through_the_plugins_build_phase():
    build = built_library_dirs()[0]
    result = run_dry("--dry-run", "--build-dir", str(build))
    assert result.returncode == 0, result.stdout + result.stderr
    n = len(build_cases())
    assert f"of {n}/{n} cases ok" in result.stdout
    assert "9 creators" in result.stdout  # SwiGLU (issue 26), RMSNorm and attention (issue 43) joined the six


def test_runs_from_the_repository_root_with_a_bare_python():
    """The GPU machine runs `python3 -m trt_plugin_kit.benchmarks` in a copy of the tree, with no install and
    no virtualenv: -S leaves site-packages (and so any installed copy of the package) out of sys.path."""
    args = ["--dry-run"]
    builds = built_library_dirs()
    if builds:
        args += ["--build-dir", str(builds[0])]
    result = subprocess.run(
        [sys.executable, "-S", "-m", ENTRY, *args], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT
    )
    assert result.returncode == 0, result.stdout + result.stderr
    n = len(build_cases())
    assert f"{n} cases" in result.stdout
    if builds:
        assert f"of {n}/{n} cases ok" in result.stdout
    usage = subprocess.run(
        [sys.executable, "-S", "-m", ENTRY, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert usage.returncode == 0 and usage.stdout.startswith("usage: python3 -m trt_plugin_kit.benchmarks")


# ------------------------------------------------------------------------------ the case list itself
def test_cases_cover_issue_4():
    cases = build_cases()
    by_id = {c.id: c for c in cases}
    assert {c.family for c in cases} == set(FAMILY_ORDER)
    large = [c for c in cases if c.group == "large"]
    assert all(c.graph_batch == 0 for c in large)
    # L2Normalize at [65536, 1024] and rows of 128 and 4096, FP32 and FP16
    l2 = {(c.dtype, c.inputs[0]) for c in large if c.family == "L2Normalize"}
    assert l2 == {(d, s) for d in ("fp32", "fp16") for s in ((65536, 1024), (524288, 128), (16384, 4096))}
    # >= 256 MiB of input for the element-wise and pool ops in both float types
    for c in large:
        if c.family in ("PReLU", "LeakyReLU", "Pool") and c.dtype != "int8":
            assert c.input_bytes >= 256 * 2**20, c.id
            assert c.inputs[0] == (256, 64, 112, 112)
    fc = [c for c in large if c.family == "FullyConnected"]
    assert {(c.dtype, c.inputs[0], c.outputs[0]) for c in fc} == {
        ("fp32", (4096, 800), (4096, 500)),
        ("fp16", (4096, 800), (4096, 500)),
    }
    assert all(c.flops == 2 * 4096 * 800 * 500 and "F.linear" in c.peers for c in fc)
    # INT8 pools compare with our FP32 and FP16 pools, which exist
    for c in cases:
        if c.dtype == "int8":
            assert c.versus and all(v in by_id for v in c.versus)
            assert not c.peers
    # MNIST serving sizes
    mnist = [c for c in cases if c.group == "mnist"]
    assert {c.batch for c in mnist} == set(MNIST_BATCHES) == {1, 64, 1024}
    assert all(c.graph_batch == 100 for c in mnist)
    lenet = {(c.id.split("/")[2], c.inputs[0][1:]) for c in mnist if c.batch == 1}
    assert {("pool1", (20, 24, 24)), ("pool2", (50, 8, 8)), ("fc1", (50, 4, 4)), ("fc2", (500,))} <= lenet
    assert ("prelu", (500,)) in lenet


def test_every_target_of_issue_4_is_checked():
    cases = build_cases()
    targets = [(c, t) for c in cases for t in c.targets]
    thresholds = {(t.metric, t.threshold) for _, t in targets}
    assert thresholds == {
        ("pct_copy", 85.0),
        ("pct_copy", 90.0),
        ("pct_copy", 95.0),
        ("pct_copy", 80.0),
        ("pct_copy", 70.0),
        ("speedup_vs", 3.0),
        ("speed_ratio", 0.95),
        ("speed_ratio", 0.97),  # the serving-size round: every plugin-vs-peer comparison
        ("speed_ratio", 0.7),  # attention at long sequences (issue 43)
        ("median_us", 5.0),
    }
    assert sum(t.threshold == 85.0 for _, t in targets) == 6  # L2Normalize: 3 shapes x 2 dtypes
    assert sum(t.metric == "pct_copy" and t.threshold == 80.0 for _, t in targets) == 4  # pool max/avg x 2
    for c, t in targets:
        if t.metric == "speedup_vs":
            assert c.dtype == "int8" and "/fp32/" in t.versus
        if t.metric == "median_us":
            assert c.batch == 1 and c.graph_batch == 100
    batch1 = [c for c in cases if c.batch == 1]
    assert batch1 and all(any(t.metric == "median_us" for t in c.targets) for c in batch1)
    assert {c.plugin for c in batch1} == set(FAMILY_ORDER)  # each plugin at batch 1


def test_every_peer_comparison_is_a_target_of_issue_16():
    cases = build_cases()
    comparisons = [(c.id, p) for c in cases for p in c.peers]
    # the count issue 16 gives, SwiGLU's ten (issue 26), issue 43's: RMSNorm 9 large, attention 32 long,
    # both at 3 batches x 3 types, SwiGLU's 2 BF16
    assert len(comparisons) == 80 + 10 + (9 + 32 + 18 + 2)
    peer_targets = {(c.id, t.peer) for c in cases for t in c.targets if t.threshold == PEER_RATIO}
    long_attention = {(c.id, p) for c in cases for p in c.peers if c.peer_ratio == ATTENTION_LONG_RATIO}
    assert len(long_attention) == 32 and peer_targets == set(comparisons) - long_attention
    for c in cases:
        if (c.id, c.peers[0] if c.peers else None) in long_attention:
            assert [t.threshold for t in c.targets] == [ATTENTION_LONG_RATIO] and c.flops > 0
    fc = {(c.id, t.peer) for c in cases for t in c.targets if c.family == "FullyConnected"}
    assert ("mnist/b64/fc1/fp16/64x50x4x4->500", "torch.matmul") in fc  # the issue's table names it


def test_lenet_chains_join_the_mnist_cases():
    chains = build_chains()
    assert [(c.batch, c.dtype) for c in chains] == [(b, d) for b in MNIST_BATCHES for d in ("fp32", "fp16")]
    by_id = {c.id: c for c in build_cases()}
    for chain in chains:
        assert chain.check() == []
        names = [s.case.id.split("/")[2] for s in chain.steps]
        assert names == ["pool1", "pool2", "fc1", "prelu", "fc2"]
        assert all(s.case.id in by_id for s in chain.steps)  # the same cases as the per-enqueue ones
        assert chain.input_shapes() == [(chain.batch, 20, 24, 24), (chain.batch, 50, 8, 8)]
        nodes = chain.spec.split("|")
        assert len(nodes) == 5 and nodes[0].startswith("Pool#mode=s:max;") and nodes[4].endswith("#3.0")
        assert nodes[2].split("#")[2] == f"{chain.dtype}:{chain.batch},50,4,4"
    broken = chains[0]
    broken.steps[3] = lenet_chain.ChainStep(broken.steps[3].case, ("1.0",))  # pool2's output is not [N, 500]
    assert broken.check() and "!=" in broken.check()[0]


def test_bytes_moved_and_rotation_rule():
    by_id = {c.id: c for c in build_cases()}
    pool = by_id["pool/max/fp16/256x64x112x112"]
    assert pool.outputs == [(256, 64, 56, 56)]
    assert pool.bytes_moved == (256 * 64 * 112 * 112 + 256 * 64 * 56 * 56) * 2
    fc = by_id["fc/fp32/4096x800->500"]
    assert fc.bytes_moved == (4096 * 800 + 4096 * 500 + 500 * 800 + 500) * 4
    concat = by_id["concat_copy/fp32/2x32768x1024"]
    assert concat.outputs == [(65536, 1024), (32768, 1024)]
    l2 = 50 * 2**20
    assert rotation_sets(256 * 2**20, l2, 65536) == 2
    assert rotation_sets(2000, l2, 65536) == 52429
    assert rotation_sets(2000, l2, 4096) == 4096
    assert time_boxed(200, 1000.0, 50.0, 0.01) == 100  # never fewer than 100
    assert time_boxed(200, 1.0, 50.0, 2.0) == 200


# ------------------------------------------------------------------ evaluation and reports (no GPU)
class StandInLibrary:
    """Stands in for libplugin_bench.so in these tests: its "timings" follow from a fixed bandwidth so that
    the code after the measurement (derived metrics, targets, reports) can run here. Nothing it returns is
    a measurement."""

    BYTES_PER_US = 2.5e6  # a made-up 2.5 TB/s
    loaded = "stand-in"

    def __init__(self, bench_path, plugin_path):
        self.calls = []

    def device(self):
        return {
            "name": "stand-in device",
            "compute_capability": "9.0",
            "multiprocessors": 132,
            "l2_bytes": 50 * 2**20,
            "memory_bytes": 80 * 2**30,
            "cuda_driver_api": 13000,
            "cuda_runtime": 13000,
        }

    @staticmethod
    def _stats(us):
        return {name: None for name in RESULT_FIELDS} | {
            "median_us": us,
            "p10_us": us * 0.98,
            "p90_us": us * 1.03,
            "min_us": us * 0.97,
            "max_us": us * 1.2,
            "mean_us": us,
            "samples": 200.0,
        }

    def copy(self, nbytes, repetitions, options):
        # a made-up 3.0 TB/s cudaMemcpyAsync, 3.3 TB/s for the resident vector copy; no bulk copy (sm_75)
        kernel = dict(o.split("=", 1) for o in options.split(";") if o).get("copy_kernel", "memcpy")
        if kernel.startswith("bulk:"):
            raise BenchError("the bulk copy (TMA) kernel needs sm_90+ and this build's sm_90 code")
        tb_per_s = 3.3 if kernel == "vector:8:4" else 3.0
        return self._stats(2 * nbytes / (tb_per_s * 1e6)) | {"method": kernel}

    def chain(self, spec, repetitions, options):
        self.calls.append((spec, repetitions, options))
        nodes = spec.count("|") + 1
        return {
            "forward": self._stats(2.0 * nodes),
            "floor": self._stats(1.5 * nodes),
            "graph_nodes": nodes,
            "kernel_nodes": nodes,
            "rotation_sets": 128,
            "input_bytes": 0,
            "tactics": [0] * nodes,
        }

    def run(self, case, repetitions, options):
        self.calls.append((case.id, repetitions, options))
        if case.id.startswith("mnist/b1/pool2"):
            raise BenchError("enqueue returned 700: stand-in failure")
        us = case.bytes_moved / self.BYTES_PER_US + (3.0 if case.group == "mnist" else 0.0)
        spec = ";".join(f"{case.dtype}:" + ",".join(map(str, s)) for s in case.outputs)
        return spec, self._stats(us)


def test_measure_flow_with_a_stand_in_library(tmp_path, monkeypatch):
    build = tmp_path / "build"
    build.mkdir()
    (build / BENCH_LIBRARY).write_bytes(b"")
    (build / PLUGIN_LIBRARY).write_bytes(b"")
    monkeypatch.setattr(cli, "BenchLibrary", StandInLibrary)
    out = tmp_path / "out"
    code = cli.main(["--no-torch", "--no-chart", "--build-dir", str(build), "--out", str(out), "--quick"])
    assert code == 1  # no case fails, but the stand-in's bandwidth misses targets: a regression fails the run
    report = json.loads((out / "benchmark.json").read_text())
    assert report["meta"]["command"] == (
        f"python3 -m trt_plugin_kit.benchmarks --no-torch --no-chart --build-dir {build} --out {out} --quick"
    )
    assert report["roofline"]["source"] == "cudaMemcpyAsync"
    assert math.isclose(report["roofline"]["copy_gb_per_s"], 3000.0, rel_tol=1e-6)
    ids = [c["id"] for c in report["cases"]]
    assert ids == [c.id for c in select_cases(build_cases(), True, [])]
    l2 = next(c for c in report["cases"] if c["id"] == "l2normalize/fp32/65536x1024")
    assert math.isclose(l2["plugin_result"]["pct_copy"], 2500.0 / 3000.0 * 100.0, rel_tol=1e-6)
    assert l2["peers"][0]["error"] == "--no-torch"
    # the copies of its size: cudaMemcpyAsync, every copy kernel (the bulk ones refused here), the best named
    assert l2["same_size_copy"]["kernel"] == "memcpy"
    assert [c["kernel"] for c in l2["same_size_copy_kernels"]] == list(cli.SAME_SIZE_COPY_KERNELS)
    assert all("sm_90" in c["error"] for c in l2["same_size_copy_kernels"] if c["kernel"].startswith("bulk:"))
    best = l2["best_same_size_copy"]
    assert best["kernel"] == "vector:8:4"
    assert math.isclose(best["plugin_pct"], 2500.0 / 3300.0 * 100.0, rel_tol=1e-6)
    statuses = {(t["case"], t["metric"]): t for t in report["targets"]}
    assert statuses[("l2normalize/fp32/65536x1024", "pct_copy")]["status"] == "FAIL"  # 83.3% < 85%
    assert statuses[("prelu/fp16/256x64x112x112", "pct_copy")]["status"] == "FAIL"  # 83.3% < 90%
    assert statuses[("fc/fp32/4096x800->500", "speed_ratio")]["status"] == "NOT MEASURED"  # no torch
    # INT8 moves a quarter of FP32's bytes: 4x faster in this stand-in
    int8 = statuses[("pool/max/int8/256x64x112x112", "speedup_vs")]
    assert int8["status"] == "PASS" and math.isclose(int8["value"], 4.0, rel_tol=1e-6)
    assert statuses[("mnist/b1/prelu/fp32/1x500", "median_us")]["status"] == "PASS"
    md = (out / "benchmark.md").read_text()
    assert "## Targets:" in md and "| **plugin** |" in md and "our FP32 Pool" in md
    assert "| best same-size copy |" in md and "| `vector:8:4` |" in md and "**3,300**" in md
    assert report["summary"]["targets"]["PASS"] >= 3
    assert report["summary"]["errors"] == 0 and report["summary"]["targets"]["FAIL"] >= 1
    # the LeNet chain of --quick: plugin timings and the floor recorded, PyTorch's side not measured
    (chain,) = report["chains"]
    assert chain["id"] == "lenet_chain/b1/fp32" and chain["plugin_result"]["graph_nodes"] == 5
    assert math.isclose(chain["floor"]["median_us"], 7.5) and chain["peers"] == []
    assert statuses[("lenet_chain/b1/fp32", "speed_ratio")]["status"] == "NOT MEASURED"
    assert "## LeNet plugin chain" in md and "`lenet_chain/b1/fp32`" in md


def test_exit_status_follows_the_targets(tmp_path, monkeypatch):
    build = tmp_path / "build"
    build.mkdir()
    (build / BENCH_LIBRARY).write_bytes(b"")
    (build / PLUGIN_LIBRARY).write_bytes(b"")
    monkeypatch.setattr(cli, "BenchLibrary", StandInLibrary)
    common = ["--no-torch", "--no-chart", "--build-dir", str(build), "--out", str(tmp_path / "out")]
    # 3 us per enqueue meets the batch-1 target; the peer targets are not measured without PyTorch
    assert cli.main([*common, "--only", "mnist/b1/leaky_relu/fp32"]) == 0
    assert cli.main([*common, "--only", "l2normalize/fp32/65536x1024"]) == 1  # 83% of copy < 85%
    report = json.loads((tmp_path / "out" / "benchmark.json").read_text())
    assert report["summary"]["targets"]["FAIL"] == 1 and report["summary"]["errors"] == 0


def test_chain_targets_and_report_with_torch_timings():
    record = {
        "id": "lenet_chain/b64/fp16",
        "steps": ["mnist/b64/pool1/max/fp16/x", "p2", "mnist/b64/fc1/fp16/x", "pr", "mnist/b64/fc2/fp16/x"],
        "plugin_result": {
            "median_us": 10.0,
            "p10_us": 9.9,
            "p90_us": 10.2,
            "graph_nodes": 5,
            "kernel_nodes": 5,
            "rotation_sets": 28,
            "tactics": [0, 0, 20, 0, 21],
        },
        "floor": {"median_us": 6.0, "p10_us": 5.9, "p90_us": 6.1},
        "peers": [
            {"name": "PyTorch graph", "median_us": 12.0, "p10_us": 11.9, "p90_us": 12.1, "speed_ratio": 1.2}
        ],
    }
    slower = dict(record, id="lenet_chain/b1/fp32", peers=[dict(record["peers"][0], speed_ratio=0.99)])
    rows = lenet_chain.evaluate([record, slower])
    assert [r["status"] for r in rows] == ["PASS", "FAIL"]  # at least as fast: no noise allowance
    md = "\n".join(lenet_chain.markdown([record]))
    assert "| `lenet_chain/b64/fp16` | 10.00 (9.90 – 10.20) | 12.00 (11.90 – 12.10) | 1.20x | 5 (5) |" in md
    assert md.rstrip().endswith("| 28 | 20, 21 |")


def test_chain_at_batch_1_within_its_launch_floor():
    """Issue 42's target: at batch 1 the chain's median over its launch floor's, at most 1.4; other batches
    have none."""

    def chain(batch, mine, floor):
        return {
            "id": f"lenet_chain/b{batch}/fp32",
            "batch": batch,
            "plugin_result": {"median_us": mine},
            "floor": {"median_us": floor},
            "peers": [{"name": lenet_chain.TORCH_PEER, "speed_ratio": 1.5}],
        }

    rows = lenet_chain.evaluate([chain(1, 8.8, 6.4), chain(1, 9.4, 6.4), chain(64, 15.0, 6.5)])
    floor_rows = [r for r in rows if r["target"] == lenet_chain.FLOOR_TARGET]
    assert [(r["status"], round(r["value"], 3)) for r in floor_rows] == [("PASS", 1.375), ("FAIL", 1.469)]
    unmeasured = lenet_chain.floor_target(dict(chain(1, 8.8, 6.4), floor=None))
    assert unmeasured["status"] == "NOT MEASURED"


def test_tactic_timings_and_their_table():
    timings = parse_tactic_timings("0:408.3 1:486.5 3:384.9")
    assert timings == {0: 408.3, 1: 486.5, 3: 384.9}
    case = {
        "id": "leaky_relu/fp32/256x64x112x112",
        "plugin_result": {
            "tactic": 3.0,
            "tactic_us": 384.9,
            "default_tactic_us": 408.3,
            "tactic_timings": timings,
        },
    }
    no_tactics = {"id": "other/plugin/without/tactics", "plugin_result": {"tactic": None}}
    brief = "\n".join(tactics_markdown([case, no_tactics], full=False))
    assert "| `leaky_relu/fp32/256x64x112x112` | 3 | 3 | 384.90 | 408.30 | 1.061x |" in brief
    assert "without/tactics" not in brief and "486.50" not in brief
    full = "\n".join(tactics_markdown([case], full=True))
    assert "0: 408.30, 1: 486.50, **3: 384.90** |" in full
    assert tactics_markdown([no_tactics], full=True) == []


def test_measure_records_a_failing_case_and_goes_on(tmp_path, monkeypatch):
    build = tmp_path / "build"
    build.mkdir()
    (build / BENCH_LIBRARY).write_bytes(b"")
    (build / PLUGIN_LIBRARY).write_bytes(b"")
    monkeypatch.setattr(cli, "BenchLibrary", StandInLibrary)
    out = tmp_path / "out"
    code = cli.main(["--no-torch", "--build-dir", str(build), "--out", str(out), "--only", "mnist/b1/"])
    assert code == 1
    report = json.loads((out / "benchmark.json").read_text())
    failed = [c for c in report["cases"] if c["error"]]
    assert failed and all(c["id"].startswith("mnist/b1/pool2") for c in failed)
    assert all(c["plugin_result"] for c in report["cases"] if not c["error"])
    assert {t["status"] for t in report["targets"] if t["case"].startswith("mnist/b1/pool2")} == {
        "NOT MEASURED"
    }
    assert report["summary"]["errors"] == len(failed)
    md = (out / "benchmark.md").read_text()
    assert "stand-in failure" in md
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (out / "benchmark.png").stat().st_size > 10_000


# ------------------------------------------------------------------------- FullyConnected's workspace
# What the plugin asks TensorRT for, through its real build-phase calls (libplugin_bench.so's plan, no GPU):
# cuBLASLt's 32 MiB plus room for the padded-output tactics' product (M rounded up to 128 bytes of row, at the
# profile's largest batch, capped at 64 MiB). The GPU harness checks those tactics' results.
MIB = 1 << 20
CUBLAS_WORKSPACE = 32 * MIB

PLAN_WORKSPACES = """
import json, sys
from pathlib import Path
from trt_plugin_kit.benchmarks.cases import build_cases
from trt_plugin_kit.benchmarks.library import BENCH_LIBRARY, PLUGIN_LIBRARY, BenchLibrary
build = Path(sys.argv[1])
lib = BenchLibrary(build / BENCH_LIBRARY, build / PLUGIN_LIBRARY)
cases = {c.id: c for c in build_cases()}
print(json.dumps({i: lib.plan(cases[i])[1]["workspace_bytes"] for i in sys.argv[2:]}))
"""


def padded_reserve(rows: int, outputs: int, element_bytes: int) -> int:
    pitch = -(-outputs * element_bytes // 128) * 128
    return -(-min(rows * pitch, 64 * MIB) // 256) * 256


EXPECTED = {
    # case id: (rows, outputs, bytes per element)
    "fc/fp16/4096x800->500": (4096, 500, 2),  # 1000-byte rows -> 1024: 4 MiB
    "fc/fp32/4096x800->500": (4096, 500, 4),  # 2000-byte rows -> 2048: 8 MiB
    "mnist/b1024/fc1/fp16/1024x50x4x4->500": (1024, 500, 2),  # 1 MiB (quoted in the plugin's README)
    "mnist/b1/fc2/fp16/1x500->10": (1, 10, 2),  # one 128-byte row, rounded to 256 bytes
}


@pytest.mark.skipif(not built_library_dirs(), reason="libplugin_bench.so not built (make plugins)")
def test_workspace_holds_cublas_and_the_padded_product():
    result = subprocess.run(
        [sys.executable, "-c", PLAN_WORKSPACES, str(built_library_dirs()[0]), *EXPECTED],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    got = json.loads(result.stdout.strip().splitlines()[-1])
    for case_id, (rows, outputs, element_bytes) in EXPECTED.items():
        assert got[case_id] == CUBLAS_WORKSPACE + padded_reserve(rows, outputs, element_bytes), case_id
    assert got["mnist/b1024/fc1/fp16/1024x50x4x4->500"] - CUBLAS_WORKSPACE == MIB


OP_API_SCRIPT = """
import ctypes, sys
from pathlib import Path
from trt_plugin_kit.benchmarks.library import BenchError, BenchLibrary
from trt_plugin_kit.models.vit_graph import PluginKernels
build = Path(sys.argv[1])
ops = PluginKernels(BenchLibrary(build / "libplugin_bench.so", build / "libtrt_plugin_kit.so"), None)
c, handle = ops.lib.lib, ctypes.c_int(-1)
made = ops._call(c.tpk_bench_op_create, b"RmsNormLastAxis", b"eps=f:1e-06", b"fp32:2,50,64;fp32:64",
                 ctypes.byref(handle))
print("created:", made, handle.value)
for name, call in (
    ("misspelled", lambda: ops._call(c.tpk_bench_op_create, b"RmsNormLastAxiz", b"", b"fp32:4;fp32:4",
                                     ctypes.byref(handle))),
    ("unknown handle", lambda: ops._call(c.tpk_bench_op_enqueue, 99, None, None, None)),
):
    try:
        call()
        print(name, "accepted")
    except BenchError as error:
        print(name, "refused:", error)
"""


def test_the_op_api_makes_a_plugin_and_refuses_bad_calls():
    """libplugin_bench.so's tpk_bench_op_* (models/vit_graph.py's plugins), without a GPU: RmsNormLastAxis
    made through TensorRT's build sequence, attached and shaped reports its output; a misspelled plugin and an
    unknown handle are refused with the reason, and nothing crashes."""
    dirs = built_library_dirs()
    if not dirs:
        pytest.skip("no built libplugin_bench.so (make test builds it; or set TPK_BENCH_BUILD_DIR)")
    run = subprocess.run(
        [sys.executable, "-c", OP_API_SCRIPT, str(dirs[0])],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "created: fp32:2,50,64 0" in run.stdout
    assert "misspelled refused: no creator trt_plugin_kit::RmsNormLastAxiz" in run.stdout
    assert "unknown handle refused: no plugin op with handle 99" in run.stdout


def test_vit_graph_imports_no_numpy_before_pytorch():
    """vit_graph's main() loads libplugin_bench.so and PyTorch before NumPy: NumPy first made `import torch`
    crash on the H200 (exit 139), so importing the module must not import NumPy."""
    code = "import sys, trt_plugin_kit.models.vit_graph; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr
