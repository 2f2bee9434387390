"""The reports of a run: benchmark.json, benchmark.md (tables) and benchmark.png (chart, with matplotlib)."""

from __future__ import annotations

import json
from pathlib import Path

from trt_plugin_kit.benchmarks import lenet_chain
from trt_plugin_kit.benchmarks.cases import FAMILY_ORDER, GIB, MNIST_GRAPH_BATCH

METHOD = (
    "CUDA events around every enqueue (or every CUDA graph of N enqueues) on a non-default stream; "
    "a GPU wait kernel before each timed call so that the host has queued it before the GPU gets "
    "there; inputs rotate over sets whose inputs together exceed 2x the L2 cache; non-zero random "
    "inputs; warm-up over the sets first; median, p10, p90 over >= 100 repetitions. Bytes moved = "
    "inputs read + outputs written (FC: + weights and bias), in GB (1e9). % of copy = achieved GB/s / "
    "device-to-device copy GB/s (1 GiB, read + write). Speed ratio = peer time / plugin time (> 1: the "
    "plugin is faster). FP32 matrix products with TF32 off everywhere (plugin: CUBLAS_COMPUTE_32F; "
    "PyTorch: allow_tf32 = False)."
)


def fmt(value, digits=1, suffix=""):
    if value is None:
        return "—"
    return f"{value:,.{digits}f}{suffix}"


def metric_text(metric: str, value) -> str:
    if value is None:
        return "—"
    if metric == "pct_copy":
        return f"{value:.1f}%"
    if metric == "median_us":
        return f"{value:.2f} µs"
    return f"{value:.2f}x"


def profile_links(out: Path) -> dict[str, str]:
    """{case id: link to its Nsight Compute profile} where ../ncu/ncu.json (scripts/gpu_ncu.sh) lies beside
    the reports' folder (records/benchmarks and records/ncu), else nothing."""
    ncu = out.parent / "ncu" / "ncu.json"
    if not ncu.is_file():
        return {}
    cases = json.loads(ncu.read_text()).get("cases", [])
    return {c["id"]: f"../ncu/ncu.md#{c['anchor']}" for c in cases if c.get("kernels") and c.get("anchor")}


def case_tables(records: list[dict], profiles: dict[str, str]) -> list[str]:
    """One table per group and family: every implementation's times, bandwidth and speed-up."""
    lines: list[str] = []
    for group, title in (("large", "Large shapes"), ("mnist", "MNIST serving sizes")):
        for family in FAMILY_ORDER:
            rows = [r for r in records if r["group"] == group and r["family"] == family]
            if not rows:
                continue
            fc = family == "FullyConnected"
            lines += [f"## {title}: {family}", ""]
            if group == "mnist":
                lines += [f"Time per enqueue in CUDA graphs of {MNIST_GRAPH_BATCH} enqueues.", ""]
            head = "| case | implementation | median µs | p10 – p90 µs | GB/s | % of copy |"
            sep = "|---|---|---:|---:|---:|---:|"
            if fc:
                head += " TFLOP/s |"
                sep += "---:|"
            lines += [head + " plugin speed-up |", sep + "---:|"]
            for r in rows:
                impls = []
                if r.get("plugin_result"):
                    impls.append(("**plugin**", r["plugin_result"], None))
                for p in r.get("peers", []) + r.get("versus", []):
                    impls.append((p["name"], p, p.get("speed_ratio")))
                if r.get("error"):
                    impls.append(("error", {}, None))
                first = True
                for name, m, ratio in impls:
                    label = f"`{r['id']}`" if first else ""
                    if first and r["id"] in profiles:
                        label += f" ([ncu]({profiles[r['id']]}))"
                    first = False
                    if name == "error":
                        lines.append(
                            f"| {label} | error: {r['error']} | | | | |" + (" |" if fc else "") + " |"
                        )
                        continue
                    if m.get("error"):
                        lines.append(
                            f"| {label} | {name}: {m['error']} | | | | |" + (" |" if fc else "") + " |"
                        )
                        continue
                    spread = f"{fmt(m.get('p10_us'), 2)} – {fmt(m.get('p90_us'), 2)}"
                    row = (
                        f"| {label} | {name} | {fmt(m.get('median_us'), 2)} | {spread} | "
                        f"{fmt(m.get('gb_per_s'), 0)} | {fmt(m.get('pct_copy'), 1, '%')} |"
                    )
                    if fc:
                        row += f" {fmt(m.get('tflops'), 1)} |"
                    row += f" {fmt(ratio, 2, 'x')} |"
                    lines.append(row)
            lines.append("")
    return lines


def markdown(report: dict, profiles: dict[str, str] | None = None) -> str:
    """The tables; `profiles` ({case id: link}, profile_links) adds a link to each profiled case."""
    profiles = profiles or {}
    meta = report["meta"]
    dev = meta.get("device") or {}
    roof = report.get("roofline") or {}
    lines = ["# trt_plugin_kit plugin benchmark (roofline and serving-size targets)", ""]
    lines.append(
        f"Device **{dev.get('name', '?')}** (sm_{str(dev.get('compute_capability', '?')).replace('.', '')}, "
        f"{dev.get('multiprocessors', '?')} SMs, L2 {fmt((dev.get('l2_bytes') or 0) / 2**20, 0)} MiB), "
        f"driver {meta.get('driver_version', '?')}, CUDA runtime {meta.get('cuda_runtime', '?')}, "
        f"PyTorch {meta.get('torch_version') or 'not available'}, {meta.get('date', '?')}."
    )
    lines.append("")
    lines.append(f"Command: `{meta.get('command', '')}`")
    lines.append("")
    copy_gbps = roof.get("copy_gb_per_s")
    lines.append(
        f"**Copy bandwidth (the roofline of the memory-bound kernels): {fmt(copy_gbps, 0)} GB/s** "
        f"({roof.get('source', '?')}, {fmt(roof.get('copy_bytes', 0) / GIB, 0)} GiB device to device, "
        "bytes read + written / median time)."
    )
    for key, label in (("torch_copy", "torch copy_"), ("cuda_memcpy", "cudaMemcpyAsync")):
        r = roof.get(key)
        if r:
            lines.append(
                f"- {label}: {fmt(r.get('gb_per_s'), 0)} GB/s (median {fmt(r.get('median_us'), 1)} µs)"
            )
        elif roof.get(f"{key}_error"):
            lines.append(f"- {label}: not measured ({roof[f'{key}_error']})")
    gemm_rows = []
    for r in report.get("cases", []):
        peers = {p["name"]: p for p in r.get("peers", [])}
        if r["family"] == "FullyConnected" and r.get("plugin_result"):
            matmul = (peers.get("torch.matmul") or {}).get("tflops")
            linear = (peers.get("F.linear") or {}).get("tflops")
            gemm_rows.append(
                f"| `{r['id']}` | {r['dtype']} | {fmt(matmul, 2)} | {fmt(linear, 2)} | "
                f"{fmt(r['plugin_result'].get('tflops'), 2)} |"
            )
    if gemm_rows:
        lines += [
            "",
            "cuBLAS GEMM throughput on the FullyConnected shapes (TFLOP/s = 2·N·K·M / median time):",
            "",
        ]
        lines += ["| case | dtype | torch.matmul | F.linear + bias | plugin |", "|---|---|---:|---:|---:|"]
        lines += gemm_rows
    lines += ["", f"Method: {METHOD}", ""]

    targets = report.get("targets", [])
    passed = sum(t["status"] == "PASS" for t in targets)
    lines += [f"## Targets: {passed} of {len(targets)} met", ""]
    lines += ["| target | case | measured | threshold | result |", "|---|---|---:|---:|---|"]
    for t in targets:
        thr = metric_text(t["metric"], t["threshold"])
        vs = f" (vs `{t['versus']}`)" if t.get("versus") else (f" (vs {t['peer']})" if t.get("peer") else "")
        lines.append(
            f"| {t['target']}{vs} | `{t['case']}` | {metric_text(t['metric'], t['value'])} | "
            f"{t['op']} {thr} | {'**' + t['status'] + '**' if t['status'] != 'PASS' else 'PASS'} |"
        )
    lines.append("")

    records = report.get("cases", [])
    lines += same_size_copy_markdown(records, targets)
    lines += case_tables(records, profiles)
    lines += tactics_markdown(records, full=bool((meta.get("options") or {}).get("tactics")))
    lines += lenet_chain.markdown(report.get("chains", []))
    lines += head_to_head_markdown(report.get("head_to_head", []))
    notes = [r for r in records if r.get("note")]
    if notes:
        lines += ["## Case notes", ""]
        lines += [f"- `{r['id']}`: {r['note']}" for r in notes]
        lines.append("")
    skipped = [r for r in records if r.get("skipped")]
    if skipped:
        lines += ["## Skipped", ""] + [f"- `{r['id']}`: {r['skipped']}" for r in skipped] + [""]
    return "\n".join(lines)


def copy_kernel_name(copy: dict) -> str:
    """A same-size copy's short name: memcpy, vector:B, bulk:S:K (cli's SAME_SIZE_COPY_KERNELS)."""
    return copy.get("kernel") or "memcpy"


def same_size_copy_markdown(records: list[dict], targets: list[dict]) -> list[str]:
    """The cases with a % of copy target beside copies of their own size (cli's measure_same_size_copy):
    cudaMemcpyAsync and the best copy kernel measured, what that size reaches next to the 1 GiB roofline the
    target is set against; then every copy kernel's GB/s."""
    rows = [r for r in records if r.get("same_size_copy")]
    if not rows:
        return []
    status = {t["case"]: t["status"] for t in targets if t["metric"] == "pct_copy"}
    lines = [
        "## Copy bandwidth at each case's size",
        "",
        "The target stays % of the 1 GiB copy. Beside it, copies of the case's own size (half its bytes "
        "moved copied, so as many read and written; source and destination pairs rotated past 2x the L2 "
        "cache as the plugin's inputs are), timed the same way in the same run: cudaMemcpyAsync, and the "
        "best of it and the copy kernels (`vector:B:U`: 128-bit loads and stores, U loads a thread in "
        "flight, at most B resident blocks of 256 an SM, 0 a block a tile; `bulk:S:K`, sm_90+: resident "
        "blocks, one thread each driving a ring of S shared-memory stages of K KiB, TMA bulk copies "
        "global -> shared on an mbarrier and shared -> global). Their launch ramp and tail, which 1 GiB "
        "hides, show what a transfer of that size reaches on this GPU.",
        "",
        "| case | MB moved | plugin % of the 1 GiB copy | target | memcpy µs | memcpy % of the 1 GiB copy "
        "| plugin % of memcpy | best same-size copy | its µs | its % of the 1 GiB copy | plugin % of it |",
        "|---|---:|---:|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        copy, mine = r["same_size_copy"], r.get("plugin_result") or {}
        best = r.get("best_same_size_copy") or {}
        head = f"| `{r['id']}` | {r['bytes_moved'] / 1e6:,.0f} |"
        if copy.get("error"):
            lines.append(f"{head} | | error: {copy['error']} | | | | | | |")
            continue
        lines.append(
            f"{head} {fmt(mine.get('pct_copy'), 1, '%')} | {status.get(r['id'], '—')} | "
            f"{fmt(copy.get('median_us'), 2)} | {fmt(copy.get('pct_copy'), 1, '%')} | "
            f"{fmt(copy.get('plugin_pct'), 1, '%')} | {f'`{copy_kernel_name(best)}`' if best else '—'} | "
            f"{fmt(best.get('median_us'), 2)} | {fmt(best.get('pct_copy'), 1, '%')} | "
            f"{fmt(best.get('plugin_pct'), 1, '%')} |"
        )
    return lines + [""] + copy_kernels_markdown(rows)


def copy_kernels_markdown(rows: list[dict]) -> list[str]:
    """Every same-size copy's GB/s per case (errors named), the fastest in bold."""
    kernels = [copy_kernel_name(c) for c in rows[0].get("same_size_copy_kernels") or []]
    if not kernels:
        return []
    names = ["memcpy", *kernels]
    lines = [
        "Every same-size copy, GB/s (median):",
        "",
        "| case | " + " | ".join(f"`{n}`" for n in names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for r in rows:
        copies = {copy_kernel_name(c): c for c in [r["same_size_copy"], *r.get("same_size_copy_kernels", [])]}
        best = copy_kernel_name(r.get("best_same_size_copy") or {}) if r.get("best_same_size_copy") else None
        cells = []
        for n in names:
            c = copies.get(n) or {}
            text = "error" if c.get("error") else fmt(c.get("gb_per_s"), 0)
            cells.append(f"**{text}**" if n == best else text)
        lines.append(f"| `{r['id']}` | " + " | ".join(cells) + " |")
    errors = sorted(
        {
            f"`{copy_kernel_name(c)}`: {c['error']}"
            for r in rows
            for c in r.get("same_size_copy_kernels", [])
            if c.get("error")
        }
    )
    return lines + [""] + ([f"- {e}" for e in errors] + [""] if errors else [])


def tactic_margin(result: dict) -> float | None:
    """How much faster the chosen tactic timed than the default (tactic 0): default time / chosen time."""
    chosen, default = result.get("tactic_us"), result.get("default_tactic_us")
    return default / chosen if chosen and default else None


def tactics_markdown(records: list[dict], full: bool) -> list[str]:
    """Per case with tactics: the one chosen as TensorRT's builder chooses (the fastest on this GPU) and its
    margin over the default; with ``full`` (--tactics), every tactic's time."""
    rows = [r for r in records if (r.get("plugin_result") or {}).get("tactic") is not None]
    if not rows:
        return []
    lines = [
        "## Tactics chosen on this GPU",
        "",
        "Each plugin's tactics timed before the measurement as TensorRT's builder times them (the "
        "default, tactic 0, among them), the fastest kept: graph-measured cases inside a CUDA graph of 20 "
        "enqueues (best of five), eager ones one enqueue after the wait kernel (median of 15). Margin = "
        "default's time / chosen tactic's time.",
        "",
        "| case | tactics | chosen | µs (chosen) | µs (default) | margin over the default |"
        + (" every tactic's µs |" if full else ""),
        "|---|---:|---:|---:|---:|---:|" + ("---|" if full else ""),
    ]
    for r in rows:
        m = r["plugin_result"]
        timings = m.get("tactic_timings") or {}
        chosen = int(m["tactic"])
        row = (
            f"| `{r['id']}` | {len(timings)} | {chosen} | {fmt(m.get('tactic_us'), 2)} | "
            f"{fmt(m.get('default_tactic_us'), 2)} | {fmt(tactic_margin(m), 3, 'x')} |"
        )
        if full:
            row += (
                " "
                + ", ".join(
                    (f"**{t}: {us:.2f}**" if int(t) == chosen else f"{t}: {us:.2f}")
                    for t, us in timings.items()
                )
                + " |"
            )
        lines.append(row)
    return lines + [""]


def head_to_head_markdown(rows: list[dict]) -> list[str]:
    """The kernel languages head to head: LeakyReLU's CUDA kernel against the same op in Triton."""
    if not rows:
        return []
    lines = [
        "## Kernel languages head to head: LeakyReLU in CUDA and in Triton",
        "",
        "The same op, the same buffers, the same timing: plugins/leaky_relu/leaky_relu_kernel.cu against "
        "plugins/benchmarks/triton_twin/kernel.py (compiled ahead of time like a plugin's kernel.py, "
        "launched through plugins/common/triton_kernel.h); outputs bit-identical. Ratio > 1: Triton faster.",
        "",
        "| dtype | elements | mode | Triton variant | CUDA us | Triton us | Triton speed / CUDA speed |",
        "|---|---:|---|---|---:|---:|---:|",
    ]
    for r in rows:
        mode = f"graph x{r['graph_batch']}" if r.get("graph_batch") else "eager"
        if r.get("error"):
            lines.append(f"| {r['dtype']} | {r['count']} | {mode} | ERROR: {r['error']} | | | |")
            continue
        lines.append(
            f"| {r['dtype']} | {r['count']} | {mode} | {r['variant']} | {fmt(r['cuda_median_us'], 2)} | "
            f"{fmt(r['triton_median_us'], 2)} | {fmt(r['triton_over_cuda_speed'], 2, 'x')} |"
        )
    return lines + [""]


def write_chart(report: dict, path: Path) -> str:
    """Bar chart of % of copy bandwidth (large shapes) and µs per enqueue at MNIST batch 1."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        return f"no chart: matplotlib is not importable ({error})"
    records = report.get("cases", [])
    large = [
        r
        for r in records
        if r["group"] == "large" and r.get("plugin_result") and r["family"] != "FullyConnected"
    ]
    small = [r for r in records if r["group"] == "mnist" and r.get("batch") == 1 and r.get("plugin_result")]
    fig, axes = plt.subplots(1, 2, figsize=(16, max(6, 0.32 * max(len(large), len(small)) + 2)))

    def peer_value(r, key):
        ps = r.get("peers") or r.get("versus") or []
        return ps[0].get(key) if ps else None

    for ax, rows, key, title, unit in (
        (
            axes[0],
            large,
            "pct_copy",
            "Large shapes: % of device copy bandwidth (median)",
            "% of copy bandwidth",
        ),
        (axes[1], small, "median_us", "MNIST batch 1: µs per enqueue (CUDA graph of 100)", "µs per enqueue"),
    ):
        labels = [r["id"].replace("mnist/b1/", "") for r in rows]
        ys = range(len(rows))
        mine = [r["plugin_result"].get(key) or 0 for r in rows]
        peer = [peer_value(r, key) or 0 for r in rows]
        ax.barh([y + 0.2 for y in ys], mine, height=0.4, label="plugin", color="#2a7ab9")
        ax.barh(
            [y - 0.2 for y in ys],
            peer,
            height=0.4,
            label="PyTorch peer (INT8: our FP32 pool)",
            color="#bbbbbb",
        )
        ax.set_yticks(list(ys))
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(unit)
        ax.set_title(title, fontsize=10)
        if key == "median_us":
            ax.axvline(5.0, color="red", linestyle="--", linewidth=1, label="target 5 µs")
        else:
            ax.axvline(100.0, color="black", linewidth=0.8)
        ax.legend(fontsize=7, loc="lower right")
    dev = (report["meta"].get("device") or {}).get("name", "")
    fig.suptitle(f"trt_plugin_kit plugins vs PyTorch on {dev}", fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"chart: {path}"


def write_reports(report: dict, out: Path, chart: bool) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    tmp = out / "benchmark.json.tmp"
    tmp.write_text(json.dumps(report, indent=1, sort_keys=False) + "\n")
    tmp.replace(out / "benchmark.json")
    written.append(str(out / "benchmark.json"))
    (out / "benchmark.md").write_text(markdown(report, profile_links(out)) + "\n")
    written.append(str(out / "benchmark.md"))
    if chart:
        written.append(write_chart(report, out / "benchmark.png"))
    return written
