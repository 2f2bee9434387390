"""``python3 -m trt_plugin_kit.benchmarks``: arguments, the dry run, the measurement loop, exit status."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

from trt_plugin_kit.benchmarks import lenet_chain
from trt_plugin_kit.benchmarks.cases import (
    DTYPE_BYTES,
    GIB,
    MIN_REPETITIONS,
    QUICK_IDS,
    TWIN_CASES,
    build_cases,
    build_chains,
    select_cases,
    select_chains,
)
from trt_plugin_kit.benchmarks.library import (
    BENCH_LIBRARY,
    DEFAULT_BUILD_DIR,
    PLUGIN_LIBRARY,
    BenchError,
    BenchLibrary,
    check_outputs,
    find_libraries,
)
from trt_plugin_kit.benchmarks.peers import TorchRunner, import_torch, time_peer
from trt_plugin_kit.benchmarks.report import METHOD, fmt, metric_text, tactic_margin, write_reports
from trt_plugin_kit.benchmarks.targets import attach_comparisons, derive, evaluate_targets
from trt_plugin_kit.interface import REPO_ROOT

PROG = "python3 -m trt_plugin_kit.benchmarks"
DEFAULT_OUT = REPO_ROOT / "records" / "benchmarks"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Benchmark every trt_plugin_kit plugin's enqueue against the copy bandwidth and PyTorch.",
        epilog=f"example: {PROG} --build-dir build/bench --out records/benchmarks",
    )
    p.add_argument(
        "--build-dir",
        help=f"CMake build dir with {BENCH_LIBRARY} and {PLUGIN_LIBRARY} "
        f"(default {DEFAULT_BUILD_DIR.relative_to(REPO_ROOT)})",
    )
    p.add_argument("--bench-lib", help=f"path of {BENCH_LIBRARY} (overrides --build-dir)")
    p.add_argument("--plugin-lib", help=f"path of {PLUGIN_LIBRARY} (overrides --build-dir)")
    p.add_argument(
        "--out",
        default=str(DEFAULT_OUT),
        help="directory for benchmark.json, benchmark.md, benchmark.png",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU, no PyTorch: list the cases and check the arguments (with --build-dir, also run "
        "each case's build-phase calls against the plugin library)",
    )
    p.add_argument(
        "--quick", action="store_true", help=f"smoke test: the {len(QUICK_IDS)} cases and chains of QUICK_IDS"
    )
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="TEXT",
        help="keep the cases and chains whose id contains TEXT (repeatable; comma-separated also works)",
    )
    p.add_argument(
        "--repetitions",
        type=int,
        default=200,
        help=f"timed repetitions per measurement (>= {MIN_REPETITIONS}; time-boxed by --max-seconds)",
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        default=2.0,
        help="time box of one measurement's repetitions (never fewer than 100)",
    )
    p.add_argument(
        "--time-budget",
        type=float,
        default=270.0,
        help="seconds for all cases; the cases left when it is spent are reported as skipped",
    )
    p.add_argument(
        "--spin-us",
        type=float,
        default=50.0,
        help="GPU wait before each timed call so the host has queued it (0: none)",
    )
    p.add_argument("--max-sets", type=int, default=65536, help="cap on the number of rotating input sets")
    p.add_argument("--copy-gib", type=float, default=1.0, help="size of the device-to-device copy (GiB)")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch peers and GEMM (plugins only)")
    p.add_argument("--no-chart", action="store_true", help="do not write benchmark.png")
    p.add_argument(
        "--tactics",
        action="store_true",
        help="benchmark.md (and the log) show every tactic's time per case, not only the chosen one's",
    )
    argv = sys.argv[1:] if argv is None else list(argv)
    args = p.parse_args(argv)
    args.command = f"{PROG} {shlex.join(argv)}".rstrip()  # recorded in benchmark.json and .md
    args.only = [o.strip() for item in args.only for o in item.split(",") if o.strip()]
    if args.repetitions < MIN_REPETITIONS:
        p.error(f"--repetitions must be >= {MIN_REPETITIONS} (roofline round), got {args.repetitions}")
    if args.max_seconds <= 0 or args.time_budget <= 0:
        p.error("--max-seconds and --time-budget must be > 0")
    if args.spin_us < 0 or args.spin_us > 10000:
        p.error("--spin-us must be in [0, 10000]")
    if args.max_sets < 2:
        p.error("--max-sets must be >= 2")
    if not 0.01 <= args.copy_gib <= 16:
        p.error("--copy-gib must be in [0.01, 16]")
    args.cases = select_cases(build_cases(), args.quick, args.only)
    args.chains = select_chains(build_chains(), args.quick, args.only)
    if not args.cases and not args.chains:
        p.error(f"no case matches --only {args.only}" + (" within --quick" if args.quick else ""))
    if args.dry_run and (args.build_dir or args.bench_lib or args.plugin_lib):
        for path in find_libraries(args):
            if not path.is_file():
                p.error(f"{path} does not exist (build it with cmake, see plugins/benchmarks/README.md)")
    return args


def open_libraries(bench: Path, plugin: Path, failure: str) -> BenchLibrary | None:
    """The bench and plugin libraries loaded (says which plugin library); None after printing `failure`
    (a format of {bench}, {plugin}, {error}) when they do not load."""
    try:
        lib = BenchLibrary(bench, plugin)
    except (OSError, BenchError) as error:
        print(failure.format(bench=bench, plugin=plugin, error=error))
        return None
    print(f"loaded {plugin}: {lib.loaded}")
    return lib


def dry_run(args) -> int:
    cases = args.cases
    n_targets = sum(len(c.targets) for c in cases) + len(args.chains)
    print(f"{len(cases)} cases, {len(args.chains)} chains ({n_targets} targets); no GPU, no PyTorch")
    print(f"{'case':52} {'mode':11} {'in MiB':>9} {'moved MiB':>10}  peers / targets")
    for c in cases:
        extras = ", ".join(c.peers + [f"vs {v}" for v in c.versus])
        targets = "; ".join(f"{t.metric} {t.op} {t.threshold:g}" for t in c.targets)
        print(
            f"{c.id:52} {c.mode:11} {c.input_bytes / 2**20:9.2f} {c.bytes_moved / 2**20:10.2f}  "
            f"{extras}{' | ' + targets if targets else ''}"
        )
    problems = []
    for chain in args.chains:
        steps = " -> ".join(s.case.id.split("/")[2] for s in chain.steps)
        mib = lenet_chain.input_bytes(chain, DTYPE_BYTES) / 2**20
        print(f"{chain.id:52} {'graph x1':11} {mib:9.2f} {'':10}  {steps} vs {lenet_chain.TORCH_PEER}")
        problems += chain.check()
    for problem in problems:
        print(f"FAIL {problem}")
    if problems:
        return 1
    if not (args.build_dir or args.bench_lib or args.plugin_lib):
        print("plugin-side validation skipped (pass --build-dir to run each case's build-phase calls)")
        return 0
    lib = open_libraries(*find_libraries(args), failure="FAIL loading {bench} / {plugin}: {error}")
    if lib is None:
        return 1
    failures = 0
    for c in cases:
        try:
            spec, info = lib.plan(c)
            check_outputs(c, spec)
            if info["input_bytes"] != c.input_bytes or info["output_bytes"] != c.output_bytes:
                raise BenchError(f"{c.id}: plugin sizes {info} differ from the case's")
        except BenchError as error:
            failures += 1
            print(f"FAIL {c.id}: {error}")
    print(
        f"build-phase calls (createPlugin, getOutputShapes, supportsFormatCombination, configurePlugin, "
        f"serialize round trip) of {len(cases) - failures}/{len(cases)} cases ok"
    )
    return 1 if failures else 0


def device_meta(lib: BenchLibrary, torch, command: str) -> dict:
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "python": platform.python_version(),
        "host": platform.node(),
        "method": METHOD,
    }
    meta["device"] = lib.device()
    rt = meta["device"].get("cuda_runtime", 0)
    meta["cuda_runtime"] = f"{rt // 1000}.{rt % 1000 // 10}"
    try:
        smi = (
            subprocess.run(
                [
                    "nvidia-smi",
                    "--query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem",
                    "--format=csv,noheader",
                ],
                capture_output=True,
                text=True,
                timeout=20,
                check=True,
            )
            .stdout.strip()
            .splitlines()[0]
        )
        name, driver, sm_clock, mem_clock = (s.strip() for s in smi.split(","))
        meta.update(driver_version=driver, max_sm_clock=sm_clock, max_memory_clock=mem_clock)
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as error:
        meta["driver_version"] = f"unknown ({error})"
    # A copy of the tree without its .git (the device machine's) would report an enclosing repository's
    # commit: TPK_BENCH_COMMIT names the source commit then.
    meta["git_commit"] = os.environ.get("TPK_BENCH_COMMIT") or None
    try:
        top, head = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--show-toplevel", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.split()
        if meta["git_commit"] is None and Path(top).resolve() == REPO_ROOT:
            meta["git_commit"] = head
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    if torch is not None:
        meta["torch_version"] = torch.__version__
        meta["torch_cuda"] = torch.version.cuda
        meta["cudnn"] = torch.backends.cudnn.version()
        meta["tf32"] = {"plugin FullyConnected": "CUBLAS_COMPUTE_32F (no TF32)"}
        for name, flags in (("matmul", torch.backends.cuda.matmul), ("cudnn", torch.backends.cudnn)):
            try:
                meta["tf32"][f"torch {name}.allow_tf32"] = bool(flags.allow_tf32)
            except RuntimeError as error:
                meta["tf32"][f"torch {name}.allow_tf32"] = f"unreadable: {error}"[:200]
    return meta


def open_run(args):
    """The libraries, PyTorch (if importable) and the run's metadata: (lib, torch, meta), or an exit
    status."""
    bench, plugin = find_libraries(args)
    for path in (bench, plugin):
        if not path.is_file():
            print(f"error: {path} does not exist (build it first, see plugins/benchmarks/README.md)")
            return 2
    lib = open_libraries(bench, plugin, failure="error: loading {bench} and {plugin} failed: {error}")
    if lib is None:
        return 2
    # PyTorch only after our libraries: torch's wheel ships its own libcudart.so.13; loaded first, it made the
    # plugin library bind to that copy and crash in its first runtime call (seen on the H100 with torch
    # 2.11+cu130). Loaded second, torch reuses the CUDA runtime already in the process.
    torch, torch_missing = import_torch(args)
    if torch_missing:
        print(f"note: PyTorch peers and GEMM skipped ({torch_missing})")
    try:
        meta = device_meta(lib, torch, args.command)
    except BenchError as error:
        print(f"error: no usable CUDA device: {error}")
        return 2
    meta["torch_missing"] = torch_missing
    meta["options"] = {
        k: getattr(args, k)
        for k in ("repetitions", "max_seconds", "time_budget", "spin_us", "max_sets", "quick", "tactics")
    }
    meta["options"]["only"] = args.only
    print(
        f"device: {meta['device']['name']}, driver {meta.get('driver_version')}, "
        f"CUDA {meta['cuda_runtime']}, L2 {int(meta['device']['l2_bytes']) / 2**20:.0f} MiB, "
        f"PyTorch {meta.get('torch_version', '-')}"
    )
    return lib, torch, meta


def measure_roofline(lib, torch, meta: dict, args, options: str):
    """1. The device-to-device copy (cudaMemcpyAsync and torch's copy_): (roofline record, TorchRunner or
    None, copy GB/s)."""
    copy_bytes = int(args.copy_gib * GIB) // 256 * 256
    roof = {"copy_bytes": copy_bytes}
    reps = max(args.repetitions // 4, 50)
    try:
        roof["cuda_memcpy"] = derive(lib.copy(copy_bytes, reps, options), 2 * copy_bytes, 0, None)
    except BenchError as error:
        roof["cuda_memcpy_error"] = str(error)
    runner = None
    if torch is not None:
        try:
            runner = TorchRunner(
                torch, int(meta["device"]["l2_bytes"]), args.spin_us, args.max_seconds, args.max_sets
            )
        except Exception as error:  # no peers then, but the plugins are still measured
            meta["torch_missing"] = f"PyTorch setup failed: {type(error).__name__}: {error}"
            print(f"note: {meta['torch_missing']}")
    if runner is not None:
        try:
            roof["torch_copy"] = derive(runner.copy(copy_bytes, reps), 2 * copy_bytes, 0, None)
        except Exception as error:  # the roofline falls back to cudaMemcpyAsync
            roof["torch_copy_error"] = str(error)
    source = "torch_copy" if "torch_copy" in roof else "cuda_memcpy"
    roof["source"] = {"torch_copy": "torch copy_", "cuda_memcpy": "cudaMemcpyAsync"}[source]
    copy_gbps = (roof.get(source) or {}).get("gb_per_s")
    roof["copy_gb_per_s"] = copy_gbps
    print(
        f"copy bandwidth: {fmt(copy_gbps, 0)} GB/s ({roof['source']}; cudaMemcpyAsync "
        f"{fmt((roof.get('cuda_memcpy') or {}).get('gb_per_s'), 0)} GB/s)"
    )
    return roof, runner, copy_gbps


def case_record(case) -> dict:
    return {
        "id": case.id,
        "family": case.family,
        "plugin": case.plugin,
        "dtype": case.dtype,
        "group": case.group,
        "batch": case.batch,
        "mode": case.mode,
        "graph_batch": case.graph_batch,
        "inputs": [list(s) for s in case.inputs],
        "outputs": [list(s) for s in case.outputs],
        "fields": case.fields,
        "bytes_moved": case.bytes_moved,
        "flops": case.flops,
        "note": case.note,
        "plugin_result": None,
        "same_size_copy": None,
        "same_size_copy_kernels": [],
        "best_same_size_copy": None,
        "peers": [],
        "versus": [],
        "error": None,
        "skipped": None,
    }


# The copy kernels timed beside cudaMemcpyAsync at each case's size (libplugin_bench.so's copy_kernel option):
# 128-bit vector copies (vector:B:U), a block a tile (B = 0) of 1, 2, 4 or 8 loads a thread, or a resident
# grid of 8 blocks an SM, 4 loads a thread, or 4 blocks, 8 loads; and (sm_90+) the TMA bulk-copy ring
# (bulk:S:K), 8 stages of 16 KiB or 3 of 64 KiB a block. The best of them all, cudaMemcpyAsync included, is
# the case's "best same-size copy" (on the H200, vector:0:1 at every RMSNorm size: the finest work, the
# GPU's block scheduler balancing it).
SAME_SIZE_COPY_KERNELS = (
    "vector:0:1",
    "vector:0:2",
    "vector:0:4",
    "vector:0:8",
    "vector:8:4",
    "vector:4:8",
    "bulk:8:16",
    "bulk:3:64",
)


def measure_same_size_copy(lib, case, rec: dict, args, options: str, copy_gbps) -> str:
    """Beside the 1 GiB roofline, what a copy of a case's own size reaches (half its bytes moved copied: as
    many read and written), for the cases with a % of copy target: a smaller transfer's launch ramp and tail,
    which 1 GiB hides, weigh on it as on the plugin. cudaMemcpyAsync into rec["same_size_copy"], each copy
    kernel into rec["same_size_copy_kernels"], the fastest of all into rec["best_same_size_copy"]; the log
    line's part."""
    if not rec["plugin_result"] or not any(t.metric == "pct_copy" for t in case.targets):
        return ""
    nbytes = max(256, case.bytes_moved // 2 // 256 * 256)
    mine = rec["plugin_result"].get("gb_per_s")
    repetitions = max(args.repetitions // 4, 50)

    def measured(kernel: str) -> dict:
        try:
            got = lib.copy(nbytes, repetitions, f"{options};copy_kernel={kernel}")
        except BenchError as error:
            return {"kernel": kernel, "bytes": nbytes, "error": str(error)}
        copy = derive(got, 2 * nbytes, 0, copy_gbps)
        copy.update(kernel=kernel, bytes=nbytes)
        copy["plugin_pct"] = 100.0 * mine / copy["gb_per_s"] if mine and copy.get("gb_per_s") else None
        return copy

    memcpy = measured("memcpy")
    rec["same_size_copy"] = memcpy
    rec["same_size_copy_kernels"] = [measured(kernel) for kernel in SAME_SIZE_COPY_KERNELS]
    timed = [c for c in (memcpy, *rec["same_size_copy_kernels"]) if c.get("gb_per_s")]
    best = max(timed, key=lambda c: c["gb_per_s"]) if timed else None
    rec["best_same_size_copy"] = best
    if memcpy.get("error"):
        return f" | same-size copy ERROR {memcpy['error']}"
    line = (
        f" | same-size copy {memcpy['median_us']:.2f} us ({fmt(memcpy.get('pct_copy'), 1)}% of the 1 GiB "
        f"copy's GB/s; plugin at {fmt(memcpy['plugin_pct'], 1)}% of it)"
    )
    if best:
        line += (
            f" | best same-size copy {best['kernel']} {best['median_us']:.2f} us "
            f"({fmt(best.get('pct_copy'), 1)}%; plugin at {fmt(best['plugin_pct'], 1)}% of it)"
        )
    return line


def measure_case(lib, runner, case, rec: dict, args, options: str, copy_gbps, torch_missing) -> str:
    """2./3. One case: the plugin (its tactics chosen first), then its peers, into `rec`; the log line's
    tail."""
    line = ""
    try:
        spec, result = lib.run(case, args.repetitions, options)
        check_outputs(case, spec)
        rec["plugin_result"] = derive(result, case.bytes_moved, case.flops, copy_gbps)
        m = rec["plugin_result"]
        gbps, pct = fmt(m.get("gb_per_s"), 0), fmt(m.get("pct_copy"), 1)
        line += f" plugin {m['median_us']:.2f} us ({gbps} GB/s, {pct}%)"
        if m.get("tactic") is not None:
            line += f" tactic {int(m['tactic'])} (x{fmt(tactic_margin(m), 3)} the default)"
    except Exception as error:  # recorded with the case; the run goes on with the next one
        rec["error"] = f"{type(error).__name__}: {error}" if not isinstance(error, BenchError) else str(error)
        line += f" plugin ERROR {rec['error']}"
    line += measure_same_size_copy(lib, case, rec, args, options, copy_gbps)
    if runner is not None and rec["plugin_result"]:
        for name in case.peers:
            peer = time_peer(runner, case, name, args.repetitions, copy_gbps)
            if peer.get("median_us"):
                peer["speed_ratio"] = peer["median_us"] / rec["plugin_result"]["median_us"]
                line += f" | {name} {peer['median_us']:.2f} us (x{peer['speed_ratio']:.2f})"
            else:
                line += f" | {name} ERROR {peer.get('error')}"
            rec["peers"].append(peer)
    elif torch_missing and case.peers:
        rec["peers"] = [{"name": n, "kind": "torch", "error": torch_missing} for n in case.peers]
    return line


def measure_cases(
    lib, runner, report: dict, args, options: str, started: float, out: Path
) -> tuple[dict, int]:
    """2./3. Every case within the time budget: ({id: record}, errors)."""
    records: dict[str, dict] = {}
    errors = 0
    copy_gbps = report["roofline"]["copy_gb_per_s"]
    for index, case in enumerate(args.cases, 1):
        rec = case_record(case)
        records[case.id] = rec
        report["cases"].append(rec)
        elapsed = time.monotonic() - started
        if elapsed > args.time_budget:
            rec["skipped"] = f"time budget of {args.time_budget:.0f} s spent"
            print(f"[{index:3}/{len(args.cases)} {elapsed:5.0f}s] {case.id}: skipped (time budget)")
            continue
        line = f"[{index:3}/{len(args.cases)} {elapsed:5.0f}s] {case.id} ({case.mode}):"
        line += measure_case(
            lib, runner, case, rec, args, options, copy_gbps, report["meta"]["torch_missing"]
        )
        errors += rec["error"] is not None
        print(line, flush=True)
        write_reports(report, out, chart=False)  # partial results survive an interrupted run
    return records, errors


def measure_chain(lib, runner, chain, args, options: str, line: str) -> tuple[dict, str]:
    """4. One LeNet chain (lenet_chain.measure): its record and the log line; an error is recorded in it."""
    try:
        rec = lenet_chain.measure(lib, runner, chain, args.repetitions, options)
        mine, floor = rec["plugin_result"], rec["floor"]
        line += (
            f" plugin {mine['median_us']:.2f} us per forward ({mine['graph_nodes']} graph nodes, "
            f"floor {floor['median_us']:.2f} us)"
        )
        for peer in rec["peers"]:
            if peer.get("median_us"):
                line += f" | {peer['name']} {peer['median_us']:.2f} us (x{peer['speed_ratio']:.2f})"
            else:
                line += f" | {peer['name']} ERROR {peer.get('error')}"
    except Exception as error:  # recorded with the chain; the run goes on
        rec = {"id": chain.id, "dtype": chain.dtype, "batch": chain.batch, "peers": [], "skipped": None}
        rec["error"] = str(error) if isinstance(error, BenchError) else f"{type(error).__name__}: {error}"
        line += f" ERROR {rec['error']}"
    return rec, line


def measure_chains(lib, runner, report: dict, args, started: float, out: Path) -> int:
    """4. The LeNet plugin chains, one CUDA graph per forward, against PyTorch's: the errors."""
    chain_options = f"spin_us={args.spin_us};max_seconds={args.max_seconds};" + (
        f"max_sets={min(args.max_sets, lenet_chain.CHAIN_MAX_SETS)}"
    )
    errors = 0
    for index, chain in enumerate(args.chains, 1):
        elapsed = time.monotonic() - started
        line = f"[chain {index}/{len(args.chains)} {elapsed:5.0f}s] {chain.id}:"
        if elapsed > args.time_budget:
            rec = {"id": chain.id, "dtype": chain.dtype, "batch": chain.batch, "peers": [], "error": None}
            rec["skipped"] = f"time budget of {args.time_budget:.0f} s spent"
            print(f"{line} skipped (time budget)")
        else:
            rec, line = measure_chain(lib, runner, chain, args, chain_options, line)
            errors += rec.get("error") is not None
            print(line, flush=True)
        report["chains"].append(rec)
        write_reports(report, out, chart=False)
    return errors


def measure_head_to_head(lib, report: dict, args) -> int:
    """4b. The kernel languages head to head: LeakyReLU's CUDA kernel and the same op in Triton; the
    errors."""
    report["head_to_head"] = []
    if args.quick or (args.only and "head-to-head" not in args.only):
        return 0
    errors = 0
    for dtype, count, graph_batch in TWIN_CASES:
        try:
            twin = lib.twin(dtype, count, max(args.repetitions // 2, 50), graph_batch)
            mode = f"graph x{graph_batch}" if graph_batch else "eager"
            print(
                f"[head-to-head] LeakyReLU {dtype} x{count} ({mode}): "
                f"CUDA {twin['cuda_median_us']:.2f} us, Triton {twin['triton_median_us']:.2f} us "
                f"(Triton at x{twin['triton_over_cuda_speed']:.2f} the CUDA kernel's speed)"
            )
        except BenchError as error:
            twin = {"dtype": dtype, "count": count, "graph_batch": graph_batch, "error": str(error)}
            errors += 1
            print(f"[head-to-head] LeakyReLU {dtype} x{count}: ERROR {error}")
        report["head_to_head"].append(twin)
    return errors


def finish(report: dict, records: dict, args, errors: int, started: float, out: Path) -> int:
    """5. Comparisons, targets, reports; the exit status."""
    attach_comparisons(records, args.cases)
    report["targets"] = evaluate_targets(records, args.cases) + lenet_chain.evaluate(report["chains"])
    counts = {s: sum(t["status"] == s for t in report["targets"]) for s in ("PASS", "FAIL", "NOT MEASURED")}
    report["summary"] = {
        "targets": counts,
        "errors": errors,
        "skipped": sum(1 for r in report["cases"] + report["chains"] if r.get("skipped")),
        "seconds": round(time.monotonic() - started, 1),
    }
    for line in write_reports(report, out, chart=not args.no_chart):
        print(line)
    print("\ntargets:")
    for t in report["targets"]:
        print(f"  {t['status']:12} {t['target']:52} {metric_text(t['metric'], t['value']):>10}  {t['case']}")
    print(f"summary: {json.dumps(report['summary'])}")
    # A regression fails the run; targets left unmeasured for want of PyTorch (--no-torch) do not.
    return 1 if errors or counts["FAIL"] or report["summary"]["skipped"] else 0


def measure(args) -> int:
    """The run, phase after phase: roofline, cases, chains, head to head, targets and reports."""
    started = time.monotonic()
    opened = open_run(args)
    if isinstance(opened, int):
        return opened
    lib, torch, meta = opened
    options = f"spin_us={args.spin_us};max_seconds={args.max_seconds};max_sets={args.max_sets}"
    out = Path(args.out)
    report = {"schema": 1, "meta": meta, "roofline": {}, "cases": [], "chains": [], "targets": []}
    report["roofline"], runner, _ = measure_roofline(lib, torch, meta, args, options)
    records, errors = measure_cases(lib, runner, report, args, options, started, out)
    errors += measure_chains(lib, runner, report, args, started, out)
    errors += measure_head_to_head(lib, report, args)
    return finish(report, records, args, errors, started, out)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        return dry_run(args)
    return measure(args)
