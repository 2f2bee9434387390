"""``python3 -m trt_plugin_kit.benchmarks.ncu``: Nsight Compute on chosen benchmark cases, a profile each.

Why a plugin is as fast as it is: for each case, per kernel its enqueue launches, the achieved DRAM bandwidth
and SM compute throughput as shares of the GPU's peak, the achieved and theoretical occupancy and what limits
each (the speed-of-light rule: the busier of memory and compute at >= 60 % of peak bounds the kernel, neither
means latency; the occupancy limiter is the smallest of the per-SM block limits). scripts/gpu_ncu.sh builds
the library with -DTRT_PLUGIN_KIT_NVTX=ON and runs this on the GPU machine.

Child processes run each case as the benchmark does (libplugin_bench.so, the same tactic timing):
1. one for all cases, without a profiler, to read the tactic each plugin's timing picks on this GPU
   ("-> tactic N"; 0: none);
2. per case, under ``ncu --nvtx --nvtx-include "trt_plugin_kit@<Plugin> tactic <N>/"``: only kernels inside
   that enqueue's NVTX range (plugins/common/nvtx_range.h), the first few launches, clocks left alone.
Kernels inside CUDA graphs are not in a range (NVTX marks the capture), so the eager enqueues that come before
the graphs are the ones profiled; ncu flushes the caches before each replay pass (DRAM-cold, as the
benchmark's rotating sets are).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from trt_plugin_kit.benchmarks.cases import build_cases
from trt_plugin_kit.benchmarks.library import BenchError, BenchLibrary, find_libraries

PROG = "python3 -m trt_plugin_kit.benchmarks.ncu"
NVTX_DOMAIN = "trt_plugin_kit"  # plugins/common/nvtx_range.h's kNvtxDomain
# One case per plugin at the roofline sizes first (a run cut short by --time-budget still has every plugin),
# then the INT8 pool and the LeNet serving size (batch 64).
DEFAULT_CASES = (
    "l2normalize/fp32/65536x1024",
    "prelu/fp32/256x64x112x112",
    "leaky_relu/fp32/256x64x112x112",
    "pool/max/fp32/256x64x112x112",
    "fc/fp32/4096x800->500",
    "concat_copy/fp32/2x32768x1024",
    "swiglu/fp32/16384x8192",
    "pool/max/int8/256x64x112x112",
    "mnist/b64/fc1/fp32/64x50x4x4->500",
    "mnist/b64/pool1/max/fp32/64x20x24x24",
    # Issue 43's plugins: in the list for the next GPU run; records/ncu/ has no profile of them yet.
    "rms_norm/bf16/65536x1024",
    "attention/bf16/1x16x4096x128/causal",
)
LAUNCHES = 3  # kernels profiled per case: an enqueue launches one or two (FC: cuBLASLt's and a reduction)
METRICS = {
    "duration_ns": "gpu__time_duration.sum",
    "compute_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_bytes_per_s": "dram__bytes.sum.per_second",
    "dram_peak_bytes_per_cycle": "dram__bytes.sum.peak_sustained",
    "dram_cycles_per_s": "dram__cycles_elapsed.avg.per_second",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "limit_registers": "launch__occupancy_limit_registers",
    "limit_shared_mem": "launch__occupancy_limit_shared_mem",
    "limit_warps": "launch__occupancy_limit_warps",
    "limit_blocks": "launch__occupancy_limit_blocks",
    "registers_per_thread": "launch__registers_per_thread",
    "block_size": "launch__block_size",
    "grid_size": "launch__grid_size",
    "waves_per_sm": "launch__waves_per_multiprocessor",
}
# Where a metric name of METRICS is unknown to the installed ncu: the sections that report them under theirs.
SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "MemoryWorkloadAnalysis")
BOUND_PCT = 60.0  # Nsight Compute's speed-of-light threshold for "this unit bounds the kernel"
TACTIC_LINE = re.compile(r"-> tactic (\d+)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    p.add_argument(
        "--build-dir", help="CMake build dir with libplugin_bench.so (built with TRT_PLUGIN_KIT_NVTX=ON)"
    )
    p.add_argument("--bench-lib", help=argparse.SUPPRESS)
    p.add_argument("--plugin-lib", help=argparse.SUPPRESS)
    p.add_argument("--out", default="records/ncu", help="directory for ncu.json, ncu.md and the raw CSVs")
    p.add_argument(
        "--case",
        action="append",
        default=[],
        help="a benchmark case id (repeatable); default: one per plugin, see DEFAULT_CASES",
    )
    p.add_argument("--ncu", default="ncu", help="the ncu executable")
    p.add_argument(
        "--time-budget",
        type=float,
        default=0,
        metavar="S",
        help="start no new case after S seconds (0: no limit); the rest are listed as not profiled",
    )
    p.add_argument(
        "--relink",
        action="store_true",
        help="profile nothing: write ../benchmarks/benchmark.md beside --out again, linking its profiles",
    )
    p.add_argument("--run-case", help=argparse.SUPPRESS)  # the child: run one case, no profiler logic
    return p.parse_args(argv)


def case_by_id(case_id: str):
    by_id = {c.id: c for c in build_cases()}
    if case_id not in by_id:
        raise SystemExit(
            f"{PROG}: no benchmark case {case_id!r} (python3 -m trt_plugin_kit.benchmarks --dry-run)"
        )
    return by_id[case_id]


def run_case(args) -> int:
    """The child: each case of --run-case (comma-separated ids) through libplugin_bench.so, briefly (the
    tactic timing is the benchmark's own), each announced by a "case ID" line."""
    bench, plugin = find_libraries(args)
    lib = BenchLibrary(bench, plugin)
    failed = 0
    for case_id in args.run_case.split(","):
        case = case_by_id(case_id)
        print(f"case {case.id} ({case.plugin}, graph batch {case.graph_batch})", flush=True)
        try:
            lib.run(case, 20, "max_seconds=0.3")
        except BenchError as error:
            print(f"case {case.id} failed: {error}", flush=True)
            failed += 1
    return 1 if failed else 0


def child_command(args, case_id: str) -> list[str]:
    command = [sys.executable, "-m", "trt_plugin_kit.benchmarks.ncu", "--run-case", case_id]
    for flag in ("build_dir", "bench_lib", "plugin_lib"):
        if getattr(args, flag):
            command += [f"--{flag.replace('_', '-')}", getattr(args, flag)]
    return command


def chosen_tactics(args, case_ids: list[str]) -> dict[str, int | str]:
    """{case id: the tactic its plugin's timing picks on this GPU (0: it has none), or why the case failed},
    all cases in one child process without a profiler."""
    done = subprocess.run(
        child_command(args, ",".join(case_ids)), capture_output=True, text=True, timeout=600
    )
    found: dict[str, int | str] = {}
    current = None
    for line in done.stdout.splitlines():
        if line.startswith("case "):
            current = line.split()[1]
            found[current] = line.partition(" failed: ")[2] or 0
        elif current and (match := TACTIC_LINE.search(line)):
            found[current] = int(match[1])
    said = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()] or ["no output"]
    missing = f"the case did not run without the profiler: {said[-1]}"
    return {case_id: found.get(case_id, missing) for case_id in case_ids}


def profile(args, case, tactic: int, csv_path: Path) -> str:
    """ncu on the case's enqueues of `tactic`; returns the range filtered on. Raises with ncu's own words.
    Where this ncu knows a metric of METRICS by another name, the sections that hold them do instead."""
    label = f"{case.plugin} tactic {tactic}"
    base = [
        args.ncu, "--nvtx", "--nvtx-include", f"{NVTX_DOMAIN}@{label}/", "--launch-count", str(LAUNCHES),
        "--clock-control", "none", "--csv", "--page", "raw", "--print-units", "base",
        "--log-file", str(csv_path),
    ]  # fmt: skip
    done = None
    for collect in (
        ["--metrics", ",".join(METRICS.values())],
        [a for s in SECTIONS for a in ("--section", s)],
    ):
        done = subprocess.run(base + collect + child_command(args, case.id), capture_output=True, text=True,
                              timeout=600)  # fmt: skip
        log = csv_path.read_text(errors="replace") if csv_path.exists() else ""
        if done.returncode == 0:
            return label
        if "metric" not in (done.stdout + done.stderr + log).lower():
            break
    raise RuntimeError(
        f"ncu exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}{log[-3000:]}"
    )


def number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def read_kernels(csv_path: Path) -> list[dict]:
    """ncu's raw page (--csv --page raw --print-units base): header row, units row, one row per kernel;
    the first profile of each distinct kernel, in launch order."""
    lines = csv_path.read_text(errors="replace").splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.DictReader(lines[start:]))[1:]  # [0] is the units row
    kernels, seen = [], set()
    for row in rows:
        name = row.get("Kernel Name") or row.get("Function Name") or "?"
        if name in seen:
            continue
        seen.add(name)
        kernel = {"kernel": name, "nvtx": nvtx_range(row)}
        kernel.update({key: number(row.get(metric, "")) for key, metric in METRICS.items()})
        kernels.append(derive(kernel))
    return kernels


def nvtx_range(row: dict) -> str:
    """The push/pop range ncu saw the kernel in, as "domain:range" (the raw page's thread NVTX column:
    '1431  "trt_plugin_kit:FullyConnected tactic 25:none:...:ASCII:FullyConnected tactic 25"')."""
    column = next((name for name in row if name and "Push/Pop_Range" in name), None)
    value = (row.get(column) or "") if column else ""
    value = value.split('"', 1)[1] if '"' in value else value  # after the thread id: '1431  "domain:...'
    return ":".join(value.split(":")[:2])


def derive(k: dict) -> dict:
    """The peak DRAM bandwidth, the bound (speed-of-light rule) and the occupancy limiter."""
    if k["dram_peak_bytes_per_cycle"] and k["dram_cycles_per_s"]:
        k["dram_peak_gb_per_s"] = k["dram_peak_bytes_per_cycle"] * k["dram_cycles_per_s"] / 1e9
    k["dram_gb_per_s"] = k["dram_bytes_per_s"] / 1e9 if k["dram_bytes_per_s"] is not None else None
    memory, compute = k["memory_pct"] or 0.0, k["compute_pct"] or 0.0
    if max(memory, compute) >= BOUND_PCT:
        k["bound"] = "memory" if memory >= compute else "compute"
    else:
        k["bound"] = f"latency (memory and compute < {BOUND_PCT:.0f} %)"
    limits = {name: k[f"limit_{name}"] for name in ("registers", "shared_mem", "warps", "blocks")}
    limits = {name: value for name, value in limits.items() if value is not None}
    if limits:
        least = min(limits.values())
        k["occupancy_limiter"] = (
            "/".join(n for n, v in limits.items() if v == least) + f" ({least:.0f} blocks/SM)"
        )
    return k


def fmt(value, digits=1, suffix="") -> str:
    return "–" if value is None else f"{value:,.{digits}f}{suffix}"


def markdown(report: dict) -> str:
    lines = [
        "# Nsight Compute: why each plugin is as fast as it is",
        "",
        f"Device **{report['device']}**, `{report['ncu_version']}`; command `{report['command']}`.",
        "",
        "Per case, the kernels of one enqueue at the tactic the plugin's timing picked on this GPU, "
        "profiled inside the enqueue's NVTX range (`trt_plugin_kit@<Plugin> tactic <n>/`, build option "
        "`TRT_PLUGIN_KIT_NVTX`), clocks not locked, caches flushed before each pass. DRAM % and compute % "
        "are shares of the GPU's peak (`dram__throughput`, `sm__throughput`); memory % is the busiest "
        f"memory unit (DRAM, L2, L1); bound: the busier of memory and compute at >= {BOUND_PCT:.0f} % of "
        "peak, else latency. Occupancy: achieved (theoretical) warps per SM as % of the maximum; its "
        "limiter is the smallest per-SM block limit. Script: `scripts/gpu_ncu.sh` "
        "(`trt_plugin_kit/benchmarks/ncu.py`); the timings of the same cases: "
        "[../benchmarks/benchmark.md](../benchmarks/benchmark.md).",
        "",
    ]
    for case in report["cases"]:
        lines += [f"## {case['id']}", ""]
        if case.get("error"):
            lines += [f"Not profiled: {case['error'].splitlines()[0]}", ""]
            continue
        seen = sorted({k.get("nvtx") or "?" for k in case["kernels"]})
        lines.append(
            f"Tactic {case['tactic']}; filter `{case['range']}`; {len(case['kernels'])} kernel(s), in the "
            f"NVTX range (as ncu saw it) {', '.join(f'`{r}`' for r in seen)}."
        )
        lines += ["", "| kernel | time µs | DRAM GB/s | DRAM % of peak | memory % | compute % | bound | "
                  "occupancy % (theor.) | occupancy limiter | regs | block × grid |",
                  "|---|---:|---:|---:|---:|---:|---|---:|---|---:|---|"]  # fmt: skip
        for k in case["kernels"]:
            time_us = k["duration_ns"] / 1e3 if k["duration_ns"] is not None else None
            lines.append(
                f"| `{k['kernel'][:60]}` | {fmt(time_us, 2)} | {fmt(k['dram_gb_per_s'], 0)} | "
                f"{fmt(k['dram_pct'])} | {fmt(k['memory_pct'])} | {fmt(k['compute_pct'])} | {k['bound']} | "
                f"{fmt(k['achieved_occupancy_pct'])} ({fmt(k['theoretical_occupancy_pct'], 0)}) | "
                f"{k.get('occupancy_limiter', '–')} | {fmt(k['registers_per_thread'], 0)} | "
                f"{fmt(k['block_size'], 0)} × {fmt(k['grid_size'], 0)} |"
            )
        lines.append("")
    return "\n".join(lines)


def case_anchor(case_id: str) -> str:
    """The GitHub anchor of a case's heading in ncu.md (benchmark.md links to it)."""
    return re.sub(r"[^a-z0-9_\- ]", "", case_id.lower()).replace(" ", "-")


def profile_all(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if shutil.which(args.ncu) is None:
        print(f"{PROG}: no '{args.ncu}' on PATH (Nsight Compute; run on the GPU machine)")
        return 2
    version = (
        subprocess.run([args.ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    )
    report = {"device": device_name(), "ncu_version": version[-1] if version else "?",
              "command": " ".join([PROG, *sys.argv[1:]]), "cases": []}  # fmt: skip
    start = time.monotonic()
    case_ids = args.case or list(DEFAULT_CASES)
    tactics = chosen_tactics(args, case_ids)
    for case_id in case_ids:
        case = case_by_id(case_id)
        entry = {"id": case.id, "plugin": case.plugin, "anchor": case_anchor(case.id)}
        csv_path = out / f"{case.id.replace('/', '_').replace('>', '')}.csv"
        try:
            if args.time_budget and time.monotonic() - start > args.time_budget:
                raise RuntimeError(f"not started: the time budget of {args.time_budget:.0f} s was spent")
            if isinstance(tactics[case.id], str):
                raise RuntimeError(tactics[case.id])
            entry["tactic"] = tactics[case.id]
            entry["range"] = f"{NVTX_DOMAIN}@" + profile(args, case, entry["tactic"], csv_path) + "/"
            entry["kernels"] = read_kernels(csv_path)
            if not entry["kernels"]:
                raise RuntimeError(f"ncu profiled no kernel inside {entry['range']} (see {csv_path.name})")
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            entry["error"] = str(error)
        print(
            f"{case.id}: "
            + (entry.get("error", "").splitlines() or [f"{len(entry['kernels'])} kernel(s)"])[0],
            flush=True,
        )
        report["cases"].append(entry)
        (out / "ncu.json").write_text(json.dumps(report, indent=1) + "\n")  # after each case: a run cut
        (out / "ncu.md").write_text(markdown(report) + "\n")  # short still leaves what it profiled
    relink_benchmark(out)
    failed = sum(1 for c in report["cases"] if c.get("error"))
    print(f"{PROG}: {len(report['cases']) - failed} of {len(report['cases'])} cases profiled; {out}/ncu.md")
    return 1 if failed else 0


def relink_benchmark(out: Path) -> None:
    """benchmark.md beside (../benchmarks/, the records' layout) written again from its benchmark.json,
    now with a link from each profiled case to its profile."""
    from trt_plugin_kit.benchmarks.report import markdown, profile_links  # noqa: PLC0415

    benchmark = out.parent / "benchmarks" / "benchmark.json"
    if benchmark.is_file():
        report = json.loads(benchmark.read_text())
        (benchmark.parent / "benchmark.md").write_text(
            markdown(report, profile_links(benchmark.parent)) + "\n"
        )


def device_name() -> str:
    if shutil.which("nvidia-smi") is None:
        return "? (no nvidia-smi)"
    done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                          text=True)  # fmt: skip
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else "?"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.run_case:
        return run_case(args)
    if args.relink:
        relink_benchmark(Path(args.out))
        return 0
    return profile_all(args)


if __name__ == "__main__":
    sys.exit(main())
