"""Figures quoted in the docs against the committed records they describe, relative links, and the record
file names the docs mention.

Each claim is (doc, pattern, expected): `pattern` finds the quoted text in the doc (its first group is the
figure), `expected()` formats the same figure from its record the way the doc writes it. A re-measured record
whose numbers moved fails here until the doc says what the record holds; a doc edit that drops a quoted figure
fails too (the pattern must match), so a claim is removed from this table on purpose, not by accident.
Figures measured by a test rather than kept in a record (ONNX differences) are checked in that test
(tests/unit/test_onnx_eval.py reads docs/models.md), and so are the accuracies eval prints
(tests/unit/test_models.py). The claims here compare a doc's text with a committed record, formatted the same
way: nothing is computed again (but the validation split's per-class counts, integers), so they hold on every
CPU; a record measured on another machine (a GPU run, a retraining) changes them only when it is committed.
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from trt_plugin_kit.interface import REPO_ROOT as ROOT
from trt_plugin_kit.models import mnist

BENCHMARK = "records/benchmarks/benchmark.json"  # the H200's, since the tactics (issue 42)
H100 = "records/benchmarks/h100/benchmark-2026-11-23-h100.json"  # the committed record before it
RUN1 = "records/benchmarks/history/run1-2026-11-21-h100.json"
RUN3 = "records/benchmarks/history/run3-2026-11-21-h100.json"
SERVING_ROUND = "records/benchmarks/history/serving-round-2026-11-23-h100.json"
FC16_LARGE = "fc/fp16/4096x800->500"
FC1_16_B1024 = "mnist/b1024/fc1/fp16/1024x50x4x4->500"
MODEL_RECORD = "models/lenet5_mnist.json"
SOAK = "records/soak/soak-20261121.json"
EDGE = "records/edge/edge-overhead.json"
GPU_LIFECYCLE_LOG = "records/stress/lifecycle-concurrency-h200.log"
GPU_STRESS_SUMMARY = "records/stress/stress-summary-h200.log"
DTYPES = ("fp32", "fp16")
B1_FC = "mnist/b1/fc"
PRELU_SERVING_CASES = [
    f"mnist/b{b}/prelu/{t}/{'1x' if b == 1 else f'{b}x'}500" for b in (1, 64, 1024) for t in ("fp32", "fp16")
]


@cache
def record(path: str) -> dict:
    return json.loads((ROOT / path).read_text())


def case(path: str, case_id: str) -> dict:
    return next(c for c in record(path)["cases"] if c["id"] == case_id)


def plugin_us(path: str, case_id: str) -> float:
    return case(path, case_id)["plugin_result"]["median_us"]


def peer_ratio(path: str, case_id: str, peer: str) -> float:
    """Peer time / plugin time of one case (> 1: the plugin is faster), from the medians of that run."""
    median = next(p for p in case(path, case_id)["peers"] if p["name"] == peer)["median_us"]
    return median / plugin_us(path, case_id)


def target_value(path: str, case_id: str, metric: str, peer: str | None = None) -> float:
    return next(
        t["value"]
        for t in record(path)["targets"]
        if t["case"] == case_id and t["metric"] == metric and (peer is None or t.get("peer") == peer)
    )


def chain_us(path: str, chain_id: str) -> float:
    return next(c for c in record(path)["chains"] if c["id"] == chain_id)["plugin_result"]["median_us"]


def span(values, digits: int) -> str:
    return f"{min(values):.{digits}f}–{max(values):.{digits}f}"


def validation_per_class() -> np.ndarray:
    return np.bincount(mnist.load_split().validation_labels, minlength=mnist.NUM_CLASSES)


def lifecycle_rss_growth() -> dict[str, float]:
    """Host RSS growth per plugin after the warm-up, from the GPU lifecycle log's PASS lines."""
    text = (ROOT / GPU_LIFECYCLE_LOG).read_text()
    return {
        m[1]: float(m[2])
        for m in re.finditer(r"^PASS lifecycle (\w+) .*host RSS (-?[\d.]+) MiB", text, re.MULTILINE)
    }


def stress_seconds() -> int:
    return sum(
        int(s)
        for s in re.findall(r"^== .*\((\d+) s\)$", (ROOT / GPU_STRESS_SUMMARY).read_text(), re.MULTILINE)
    )


@dataclass(frozen=True)
class Claim:
    doc: str
    pattern: str  # group 1 is the quoted figure
    expected: Callable[[], str]

    def __str__(self) -> str:
        return f"{self.doc}: {self.pattern}"


CLAIMS = [
    # docs/models.md <- models/lenet5_mnist.json and the split of ../shared/data/mnist
    Claim(
        "docs/models.md",
        r"\*\*([\d.]+) s\*\*, validation accuracy",
        lambda: f"{record(MODEL_RECORD)['train_seconds']:.1f}",
    ),
    Claim(
        "docs/models.md",
        r"validation accuracy \*\*([\d.]+) %\*\*",
        lambda: f"{record(MODEL_RECORD)['validation_accuracy'] * 100:.1f}",
    ),
    Claim(
        "docs/models.md", r"\((\d+) errors in 1,000\)", lambda: str(record(MODEL_RECORD)["validation_errors"])
    ),
    Claim(
        "docs/models.md",
        r"training\s+accuracy ([\d.]+) %",
        lambda: f"{record(MODEL_RECORD)['train_accuracy'] * 100:.1f}",
    ),
    Claim(
        "docs/models.md",
        r"16 epochs",
        lambda: "16" if record(MODEL_RECORD)["config"]["epochs"] == 16 else "?",
    ),
    Claim(
        "docs/models.md",
        r"seed (\d+) for initialization",
        lambda: str(record(MODEL_RECORD)["config"]["seed"]),
    ),
    Claim(
        "docs/models.md",
        r"1,000 digits, (\d+\.\.\d+) per class",
        lambda: "{}..{}".format(*(lambda c: (c.min(), c.max()))(validation_per_class())),
    ),
    # plugins/prelu/README.md <- the H100 record (serving sizes) and the issue-4 run 3 record (before)
    Claim(
        "plugins/prelu/README.md",
        r"([\d.]+–[\d.]+) µs per enqueue",
        lambda: span([plugin_us(H100, c) for c in PRELU_SERVING_CASES], 1),
    ),
    Claim(
        "plugins/prelu/README.md",
        r"([\d.]+–[\d.]+)x `F.prelu`",
        lambda: span([peer_ratio(H100, c, "F.prelu") for c in PRELU_SERVING_CASES], 2),
    ),
    Claim(
        "plugins/prelu/README.md",
        r"\(before the row-of-channels kernel: ([\d.]+–[\d.]+)x at batch 1\)",
        lambda: span([peer_ratio(RUN3, c, "F.prelu") for c in PRELU_SERVING_CASES[:2]], 2),
    ),
    Claim(
        "plugins/prelu/README.md",
        r"(\d+)% of copy bandwidth on an H100",
        lambda: f"{min(target_value(H100, f'prelu/{t}/256x64x112x112', 'pct_copy') for t in DTYPES):.0f}",
    ),
    # plugins/benchmarks/README.md's H200 table (issue 42): the after column <- benchmark.json
    Claim(
        "plugins/benchmarks/README.md",
        r"\| 93\.9%; 0\.95x \| ([\d.]+)%;",
        lambda: f"{target_value(BENCHMARK, 'leaky_relu/fp32/256x64x112x112', 'pct_copy'):.1f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"\| 94\.2%; 0\.95x \| ([\d.]+)%;",
        lambda: f"{target_value(BENCHMARK, 'leaky_relu/fp16/256x64x112x112', 'pct_copy'):.1f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"\| 84\.1% \| ([\d.]+)% \|",
        lambda: f"{target_value(BENCHMARK, 'l2normalize/fp16/65536x1024', 'pct_copy'):.1f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"\| 89\.1% \| ([\d.]+)% \|",
        lambda: f"{target_value(BENCHMARK, 'swiglu/fp16/16384x8192', 'pct_copy'):.1f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"\| 84\.4% \| ([\d.]+)% \|",
        lambda: f"{target_value(BENCHMARK, 'swiglu/fp16/1048576x256', 'pct_copy'):.1f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"\(floor 6\.82\) \| ([\d.]+) µs",
        lambda: f"{chain_us(BENCHMARK, 'lenet_chain/b1/fp32'):.2f}",
    ),
    # plugins/benchmarks/README.md <- benchmark.json, history/run1 and run3
    Claim(
        "plugins/benchmarks/README.md",
        r"copy roofline ([\d,]+) GB/s, \*\*\d+ of",
        lambda: f"{record(BENCHMARK)['roofline']['torch_copy']['gb_per_s']:,.0f}",
    ),
    Claim(
        "README.md",
        r"\((\d+ of \d+) targets met on an H200",
        lambda: "{} of {}".format(
            record(BENCHMARK)["summary"]["targets"]["PASS"], len(record(BENCHMARK)["targets"])
        ),
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"\*\*(\d+ of \d+) targets met\*\*",
        lambda: "{} of {}".format(
            record(BENCHMARK)["summary"]["targets"]["PASS"], len(record(BENCHMARK)["targets"])
        ),
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"`fc/fp16/4096x800->500` at ([\d.]+)x `torch.matmul`",
        lambda: f"{target_value(H100, 'fc/fp16/4096x800->500', 'speed_ratio', 'torch.matmul'):.2f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"without bias; ([\d.]+)x `F.linear`",
        lambda: f"{target_value(H100, 'fc/fp16/4096x800->500', 'speed_ratio', 'F.linear'):.2f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"at FP16 batch 4096 ([\d.]+) µs instead of",
        lambda: f"{plugin_us(H100, FC16_LARGE):.1f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"at FP16 batch 4096 [\d.]+ µs instead of ([\d.]+) µs",
        lambda: f"{plugin_us(SERVING_ROUND, FC16_LARGE):.1f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"at fc1 FP16 batch 1024 ([\d.]+) µs instead of",
        lambda: f"{plugin_us(H100, FC1_16_B1024):.1f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"at fc1 FP16 batch 1024 [\d.]+ µs instead of ([\d.]+) µs",
        lambda: f"{plugin_us(SERVING_ROUND, FC1_16_B1024):.1f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"\(copy roofline ([\d,]+) GB/s, 38 of\s+38 targets\)",
        lambda: f"{record(RUN3)['roofline']['torch_copy']['gb_per_s']:,.0f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"\| (\d+\.\d)% \(FP32 [\d.]+%\)",
        lambda: f"{target_value(RUN1, 'prelu/fp16/256x64x112x112', 'pct_copy'):.1f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"\| [\d.]+% \(FP32 ([\d.]+)%\)",
        lambda: f"{target_value(RUN1, 'prelu/fp32/256x64x112x112', 'pct_copy'):.1f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"\| \*\*([\d.]+)%\*\* \|",
        lambda: f"{target_value(RUN3, 'prelu/fp16/256x64x112x112', 'pct_copy'):.1f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"\| ([\d.]+)× \(85\.5 vs",
        lambda: f"{target_value(RUN1, 'fc/fp32/4096x800->500', 'speed_ratio'):.2f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"\*\*([\d.]+)×\*\* \(FP16",
        lambda: f"{target_value(RUN3, 'fc/fp32/4096x800->500', 'speed_ratio'):.2f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"\(FP16 ([\d.]+)×\)",
        lambda: f"{target_value(RUN3, 'fc/fp16/4096x800->500', 'speed_ratio'):.2f}",
    ),
    Claim(
        "plugins/benchmarks/README.md",
        r"\*\*([\d.]+) µs\*\* \|",
        lambda: (
            f"{max(plugin_us(RUN3, c['id']) for c in record(RUN3)['cases'] if c['id'].startswith(B1_FC)):.2f}"
        ),
    ),
    # docs/reliability.md <- the soak record and the GPU logs
    Claim(
        "docs/reliability.md",
        r"\| ([\d,]+) answered and checked",
        lambda: f"{soak('totals')['good_ok']:,}",
    ),
    Claim(
        "docs/reliability.md",
        r"\| ([\d,]+), \*\*all refused\*\*",
        lambda: f"{soak('totals')['bad_refused']:,}",
    ),
    Claim(
        "docs/reliability.md",
        r"\| ([\d.]+) requests/s on average",
        lambda: f"{soak('totals')['requests_per_s']:.1f}",
    ),
    Claim(
        "docs/reliability.md",
        r"\| (\d+) s of sustained load",
        lambda: f"{float(soak('duration_s')):.0f}",
    ),
    Claim(
        "docs/reliability.md",
        r"drift \+([\d.]+) MiB",
        lambda: f"{soak('memory')['total_rss']['drift_mib']:.2f}",
    ),
    Claim(
        "docs/reliability.md",
        r"range ([\d.]+-[\d.]+) MiB",
        lambda: "{min_mib:.1f}-{max_mib:.1f}".format(**soak("memory")["total_rss"]),
    ),
    Claim(
        "docs/reliability.md",
        r"l2norm ([\d.]+ / [\d.]+) ms",
        lambda: "{p50_ms:.1f} / {p99_ms:.1f}".format(**soak("latency")["l2norm"]),
    ),
    Claim(
        "docs/reliability.md",
        r"mnist ([\d.]+ / [\d.]+) ms",
        lambda: "{p50_ms:.1f} / {p99_ms:.1f}".format(**soak("latency")["mnist"]),
    ),
    Claim(
        "docs/reliability.md",
        r"mnist_pipeline ([\d.]+ / [\d.]+) ms",
        lambda: "{p50_ms:.1f} / {p99_ms:.1f}".format(**soak("latency")["mnist_pipeline"]),
    ),
    Claim(
        "docs/reliability.md",
        r"\+([\d,]+) = 2 × [\d,]+",
        lambda: f"{soak('metrics_delta')['nv_inference_request_failure']['mnist_pipeline']:,.0f}",
    ),
    Claim(
        "docs/reliability.md",
        r"host RSS ([\d.]+) MiB for L2Normalize",
        lambda: f"{lifecycle_rss_growth()['L2Normalize']:.2f}",
    ),
    Claim(
        "docs/reliability.md",
        r"at most ([\d.]+) MiB for the others",
        lambda: f"{max(v for k, v in lifecycle_rss_growth().items() if k != 'L2Normalize'):.2f}",
    ),
    Claim("docs/reliability.md", r"TensorRT 11\.1 headers, (\d+) s in all", lambda: str(stress_seconds())),
    # docs/SECURITY.md <- records/edge/edge-overhead.json (scripts/bench_edge.py): the record's column
    Claim("docs/SECURITY.md", r"the record, run \d+ \((\w+)\)", lambda: record(EDGE)["commit"]),
    *(
        Claim("docs/SECURITY.md", rf"\| {label} \|[^\n]*\| \*\*([\d.]+\*\* \([\d.]+\)) \|\n", figures)
        for label, figures in [
            ("gRPC l2norm", lambda: edge_ratios("grpc: l2norm [1,512] raw")),
            ("gRPC mnist_pipeline", lambda: edge_ratios("grpc: mnist_pipeline PNG")),
            ("HTTP l2norm JSON", lambda: edge_ratios("http: l2norm [1,512] JSON")),
            ("HTTP l2norm binary", lambda: edge_ratios("http: l2norm [1,512] binary")),
            ("HTTP mnist_pipeline", lambda: edge_ratios("http: mnist_pipeline PNG")),
        ]
    ),
]


def edge_ratios(request: str) -> str:
    """On / off throughput (its bold closed), the CPU ratio in brackets: as docs/SECURITY.md writes them."""
    row = record(EDGE)["results"][request]
    return f"{row['throughput_ratio']:.2f}** ({row['cpu_ratio']:.2f})"


def soak(key: str):
    """One of the soak record's figures (some kept as Python literals in strings, as written on its day)."""
    value = record(SOAK)["figures"][key]
    return ast.literal_eval(value) if isinstance(value, str) else value


@pytest.mark.parametrize("claim", CLAIMS, ids=str)
def test_quoted_figure_is_what_its_record_holds(claim: Claim):
    text = (ROOT / claim.doc).read_text()
    found = re.search(claim.pattern, text)
    assert found, f"{claim.doc} no longer quotes {claim.pattern!r}: update the doc or this table"
    quoted = found.group(1) if found.groups() else found.group(0).split()[0]
    assert quoted == claim.expected(), (
        f"{claim.doc} quotes {found.group(0)!r}; its record gives {claim.expected()!r}"
    )


# ------------------------------------------------------------------------------------ links and names

PRUNED = {"node_modules", "build"}


def files_under(top: Path, matches) -> list[Path]:
    """Files below `top` whose name `matches`. Hidden folders, node_modules and build/ are pruned before the
    walk enters them: make test makes a Debian root under build/ (its /proc mounted) while pytest runs."""
    found = []
    for folder, subfolders, files in os.walk(top):
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d not in PRUNED]
        found += [Path(folder) / name for name in files if matches(name)]
    return sorted(found)


MARKDOWN = files_under(ROOT, lambda name: name.endswith(".md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@pytest.mark.parametrize("doc", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path):
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if not (doc.parent / path).exists():
            broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)}: links to missing files {broken}"


# Logs a benchmark run writes next to its results (to $OUT or build/bench), not committed records.
RUN_OUTPUTS = {"bench-build.log", "bench-run.log"}
# Record and log files named in backquotes: `name.log`, `name.json`, `name.md` (with {a,b} alternatives).
RECORD_NAME = re.compile(r"`([\w./{},-]+\.(?:log|json|txt|png|md))`")


def expand(name: str) -> list[str]:
    brace = re.search(r"\{([^}]*)\}", name)
    if not brace:
        return [name]
    return [
        n for alt in brace[1].split(",") for n in expand(name[: brace.start()] + alt + name[brace.end() :])
    ]


@pytest.mark.parametrize(
    "doc", ["docs/reliability.md", "plugins/benchmarks/README.md", "plugins/harness/STRESS.md"]
)
def test_record_files_named_in_docs_exist(doc: str):
    """A record or log a doc names exists under the doc's folder or records/ (a bare name: anywhere there)."""
    folder = (ROOT / doc).parent
    missing = []
    for name in RECORD_NAME.findall((ROOT / doc).read_text()):
        for one in expand(name):
            if one in RUN_OUTPUTS:
                continue
            if "/" in one:
                candidates = [folder / one, ROOT / one]
            else:
                candidates = [*files_under(folder, one.__eq__), *(ROOT / "records").rglob(one)]
            if not any(c.exists() for c in candidates):
                missing.append(one)
    assert not missing, f"{doc} names files that are not committed: {missing}"
