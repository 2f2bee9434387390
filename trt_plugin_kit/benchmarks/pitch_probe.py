"""Probe: how much does an output row pitch that is not a multiple of 16 bytes cost cuBLAS's FP16 GEMM?

The one benchmark target the serving-size round missed is `fc/fp16/4096x800->500`: y[4096, 500] FP16 has
rows of 1000 bytes, and Hopper's tensor-memory-accelerator (TMA) copies need 16-byte strides, so cuBLAS may
be held to older kernels for it (the plugin's cuBLASLt and PyTorch's both ran at ~135 TFLOP/s). This probe
measures, with PyTorch timed exactly as the benchmark times its peers (TorchRunner: rotating inputs over 2x
L2, the wait kernel, one CUDA graph of 20 calls), the same GEMM with the output pitch at 500, 504 (16-byte
rows) and 512 (128-byte rows), the padded products followed by the copy into the packed [4096, 500], and
that copy alone; and it names the kernels each one launches (torch.profiler).

    python3 -m trt_plugin_kit.benchmarks.pitch_probe --out $OUT     (needs a CUDA GPU and PyTorch)

Writes pitch_probe.md (a table) and prints it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trt_plugin_kit.benchmarks.peers import TorchRunner

GRAPH_BATCH = 20


def _kernel_names(torch, fn, args) -> str:
    """The CUDA kernels one call of `fn` launches, in order."""
    from torch.profiler import ProfilerActivity, profile

    fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
    return "; ".join(name[:90] for name in names) or "-"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m trt_plugin_kit.benchmarks.pitch_probe", description=__doc__)
    p.add_argument("--rows", type=int, default=4096, help="N, the batch")
    p.add_argument("--k", type=int, default=800, help="K, the inputs per row")
    p.add_argument("--m", type=int, default=500, help="M, the outputs per row")
    p.add_argument("--out", default=".", help="directory for pitch_probe.md")
    args = p.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("pitch_probe: needs a CUDA GPU", file=sys.stderr)
        return 2
    props = torch.cuda.get_device_properties(0)
    l2_bytes = int(getattr(props, "L2_cache_size", 50 << 20))
    runner = TorchRunner(torch, l2_bytes, spin_us=50.0, max_seconds=2.0, max_sets=65536)
    n, k, m = args.rows, args.k, args.m
    half = torch.float16
    pitches = sorted({m, -(-m // 8) * 8, -(-m // 64) * 64})
    sets = max(2, -(-2 * l2_bytes // (n * k * 2)) + 1)
    xs = runner.random_slab((n, k), half, sets)
    weights = {pitch: ((torch.rand(pitch, k, device="cuda") - 0.5) * 0.1).to(half) for pitch in pitches}
    flops = 2.0 * n * k * m

    rows = []

    def measure(label: str, fn, arg_sets, useful_flops: float | None):
        stats = runner.time(fn, arg_sets, repetitions=200, graph_batch=GRAPH_BATCH)
        kernels = _kernel_names(torch, fn, arg_sets[0])
        tflops = f"{useful_flops / stats['median_us'] / 1e6:.0f}" if useful_flops else "-"
        rows.append((label, stats["median_us"], stats["p10_us"], stats["p90_us"], tflops, kernels))
        print(f"  {label}: {stats['median_us']:.2f} us  [{kernels}]", flush=True)

    for pitch in pitches:
        w_t = weights[pitch].t()
        measure(
            f"x[{n},{k}] . W^T -> y[{n},{pitch}] ({pitch * 2} B rows)",
            lambda x, w_t=w_t: torch.matmul(x, w_t),
            [(x,) for x in xs],
            flops,
        )
    for pitch in pitches:
        if pitch == m:
            continue
        w_t = weights[pitch].t()
        packed = torch.empty(n, m, dtype=half, device="cuda")
        measure(
            f"same at pitch {pitch}, then copied to [{n},{m}]",
            lambda x, w_t=w_t, packed=packed: packed.copy_(torch.matmul(x, w_t)[:, :m]),
            [(x,) for x in xs],
            flops,
        )
        padded = [torch.randn(n, pitch, dtype=half, device="cuda") for _ in range(4)]
        measure(
            f"the copy alone: [{n},{pitch}] -> [{n},{m}]",
            lambda src, packed=packed: packed.copy_(src[:, :m]),
            [(src,) for src in padded],
            None,
        )

    device = torch.cuda.get_device_name(0)
    lines = [
        f"# Output-pitch probe: FP16 GEMM N={n}, K={k}, M={m} on {device}",
        "",
        f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}; median of CUDA graphs of {GRAPH_BATCH} "
        f"calls over {sets} rotating inputs (`python3 -m trt_plugin_kit.benchmarks.pitch_probe`). "
        "TFLOP/s count the "
        f"{m}-output product only.",
        "",
        "| what | median µs | p10 – p90 µs | TFLOP/s | kernels |",
        "|---|---:|---:|---:|---|",
    ]
    lines += [f"| {r[0]} | {r[1]:.2f} | {r[2]:.2f} – {r[3]:.2f} | {r[4]} | {r[5]} |" for r in rows]
    text = "\n".join(lines) + "\n"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pitch_probe.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
