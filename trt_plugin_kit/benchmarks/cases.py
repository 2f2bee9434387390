"""The benchmark's cases: every plugin at the roofline shapes, the MNIST serving sizes, the LeNet chains.

A :class:`Case` is one plugin at one shape and dtype with its PyTorch peers and its targets (roofline and
serving-size);
nothing here needs a GPU or PyTorch, so ``--dry-run`` and the tests build the full list anywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from trt_plugin_kit.benchmarks import lenet_chain

MIN_REPETITIONS = 100  # roofline round: at least 100 repetitions per measurement
MNIST_GRAPH_BATCH = 100  # enqueues per CUDA graph for the serving sizes
MNIST_BATCHES = (1, 64, 1024)
LARGE_NCHW = (256, 64, 112, 112)  # 205.5 M elements: 822 MB FP32, 411 MB FP16, 206 MB INT8
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}
# LeNet (trt_plugin_kit/models/lenet.py): conv1's output (pool1's input), conv2's output (pool2's input),
# fc1, fc2.
LENET_CONV1 = (20, 24, 24)
LENET_CONV2 = (50, 8, 8)
LENET_FC1 = 500
LENET_FC2 = 10
# Serving sizes: every plugin-vs-peer comparison at >= 1.0x, medians of one run, with a 3% noise allowance.
PEER_RATIO = 0.97
PEER_TARGET = "plugin >= 1.0x its PyTorch peer (noise allowance 0.97x)"
GIB = 1 << 30
FAMILY_ORDER = ("L2Normalize", "PReLU", "LeakyReLU", "Pool", "FullyConnected", "ConcatCopy", "SwiGLUSplit")
FAMILY_ORDER += ("RmsNormLastAxis", "FlashAttentionTriton")
# SwiGLU (a Triton kernel, plugins/swiglu/kernel.py): a gated fc1 of LeNet's width (2 x 500 -> 500) at the
# serving sizes; large: wide rows (one row per program) and many narrow rows (16 x 64 tiles).
SWIGLU_LARGE = ((16384, 8192), (1048576, 256))
SWIGLU_MNIST_WIDTH = 2 * LENET_FC1
# The transformer plugins (issue 43) in FP32, FP16 and BF16. Serving sizes: mnist_vit's block at the MNIST
# batches (trt_plugin_kit/models/vit.py, which this bare-Python module cannot import; tests/unit/test_vit.py
# keeps them equal): 49 tokens (patches of 4 x 4 pixels) of width 64, 4 heads of 16.
# Large: RMSNorm's rows of LLM widths against the copy roofline; attention at long sequences against
# PyTorch's scaled_dot_product_attention (whatever backend it picks), ratio >= 0.7, with its TFLOP/s.
TRANSFORMER_DTYPES = ("fp32", "fp16", "bf16")
VIT_TOKENS, VIT_WIDTH, VIT_HEADS = 49, 64, 4
RMS_NORM_LARGE = ((65536, 1024), (16384, 4096), (4096, 8192))
ATTENTION_LONG = tuple((seq, head) for seq in (1024, 2048, 4096, 8192) for head in (64, 128))
ATTENTION_LONG_HEADS = 16  # B = 1: B x H x S x D of a long-context layer
ATTENTION_LONG_RATIO = 0.7
# The head-to-head of the kernel languages: LeakyReLU's CUDA kernel against the same op in Triton
# (plugins/benchmarks/triton_twin/), (dtype, elements, graph batch): the large shape and the serving sizes.
TWIN_CASES = tuple(
    [(dtype, math.prod(LARGE_NCHW), 0) for dtype in ("fp32", "fp16")]
    + [(dtype, batch * LENET_FC1, MNIST_GRAPH_BATCH) for batch in MNIST_BATCHES for dtype in ("fp32", "fp16")]
)


@dataclass(frozen=True)
class Target:
    """One roofline target, on one case: ``metric op threshold``."""

    name: str
    metric: str  # pct_copy | speed_ratio | speedup_vs | median_us
    op: str  # ">=" or "<="
    threshold: float
    peer: str | None = None  # speed_ratio: the peer's name
    versus: str | None = None  # speedup_vs: the id of our case compared with


@dataclass
class Case:
    id: str
    family: str
    plugin: str
    dtype: str
    inputs: list[tuple[int, ...]]
    outputs: list[tuple[int, ...]]  # expected; checked against the plugin's getOutputShapes
    fields: str  # field spec for libplugin_bench.so (name=kind:payload;...)
    group: str  # "large" or "mnist"
    graph_batch: int  # 0: one event pair per enqueue; N: CUDA graphs of N enqueues
    torch_op: dict  # how to build the PyTorch peers (see torch_peers)
    peers: list[str] = field(default_factory=list)  # PyTorch peers' names
    versus: list[str] = field(default_factory=list)  # our own cases to compare with (INT8 pool)
    targets: list[Target] = field(default_factory=list)
    batch: int | None = None
    flops: int = 0
    extra_bytes: int = 0  # bytes read besides the inputs (FC weights and bias)
    peer_ratio: float = PEER_RATIO  # the peers' generic target; another where the issue sets its own
    note: str = ""

    @property
    def input_bytes(self) -> int:
        return sum(math.prod(s) for s in self.inputs) * DTYPE_BYTES[self.dtype]

    @property
    def output_bytes(self) -> int:
        return sum(math.prod(s) for s in self.outputs) * DTYPE_BYTES[self.dtype]

    @property
    def bytes_moved(self) -> int:
        return self.input_bytes + self.output_bytes + self.extra_bytes

    @property
    def io_spec(self) -> str:
        return ";".join(f"{self.dtype}:" + ",".join(str(d) for d in s) for s in self.inputs)

    @property
    def mode(self) -> str:
        return f"graph x{self.graph_batch}" if self.graph_batch else "eager"


def shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape)


def pool_out(shape: tuple[int, ...]) -> tuple[int, ...]:
    n, c, h, w = shape
    return (n, c, (h - 2) // 2 + 1, (w - 2) // 2 + 1)


def _plugin_case(family: str, name: str, ident: str, where: tuple, **details) -> Case:
    """A case of the plugin `family` at `where` (the builder's dtype, group, batch, graph_batch), with id
    `<name>/<dtype>/<ident>`, under `mnist/b<batch>/` for the MNIST sizes; `details`: the other fields."""
    dtype, group, batch, graph_batch = where
    prefix = f"mnist/b{batch}/{name}" if group == "mnist" else name
    return Case(
        id=f"{prefix}/{dtype}/{ident}",
        family=family,
        plugin=family,
        dtype=dtype,
        group=group,
        graph_batch=graph_batch,
        batch=batch,
        **details,
    )


def _same_shape_case(
    family, name, fields, torch_op, peer, dtype, shape, group, target, batch, graph_batch, note
):
    """One input, one output of its shape (L2Normalize, PReLU, LeakyReLU): the plugin `family` with `fields`,
    timed against the PyTorch function `peer` (built from `torch_op`); id `<name>/<dtype>/<shape>`, under
    `mnist/b<batch>/` for the MNIST sizes."""
    return _plugin_case(
        family,
        name,
        shape_text(shape),
        (dtype, group, batch, graph_batch),
        inputs=[shape],
        outputs=[shape],
        fields=fields,
        torch_op=torch_op,
        peers=[peer],
        targets=[target] if target else [],
        note=note,
    )


def l2_case(dtype, shape, group, target=None, batch=None, graph_batch=0, note="") -> Case:
    op = ("L2Normalize", "l2normalize", "axis=i:-1;eps=f:1e-12", {"op": "normalize"}, "F.normalize")
    return _same_shape_case(*op, dtype, shape, group, target, batch, graph_batch, note)


def prelu_case(dtype, shape, group, target=None, batch=None, graph_batch=0, note="") -> Case:
    channels = shape[1]
    slopes = f"slopes=rand:{channels},3,0.05,0.3"
    op = ("PReLU", "prelu", slopes, {"op": "prelu", "channels": channels}, "F.prelu")
    return _same_shape_case(*op, dtype, shape, group, target, batch, graph_batch, note)


def leaky_case(dtype, shape, group, target=None, batch=None, graph_batch=0, note="") -> Case:
    op = (
        "LeakyReLU",
        "leaky_relu",
        "negative_slope=f:0.01",
        {"op": "leaky_relu", "slope": 0.01},
        "F.leaky_relu",
    )
    return _same_shape_case(*op, dtype, shape, group, target, batch, graph_batch, note)


def pool_case(dtype, mode, shape, group, name="pool", batch=None, graph_batch=0, note="") -> Case:
    fields = f"mode=s:{mode};kernel=i:2,2;stride=i:2,2;padding=i:0,0;count_include_pad=i:0"
    if dtype == "int8":
        fields += ";input_scale=f:0.05;output_scale=f:0.05"
    peer = "F.max_pool2d" if mode == "max" else "F.avg_pool2d"
    return _plugin_case(
        "Pool",
        f"{name if group == 'mnist' else 'pool'}/{mode}",
        shape_text(shape),
        (dtype, group, batch, graph_batch),
        inputs=[shape],
        outputs=[pool_out(shape)],
        fields=fields,
        torch_op={"op": f"{mode}_pool2d"},
        peers=[] if dtype == "int8" else [peer],  # PyTorch has no INT8 pooling on CUDA
        note=note,
    )


def fc_case(dtype, shape, outputs, group, name="fc", batch=None, graph_batch=0) -> Case:
    n, k = shape[0], math.prod(shape[1:])
    return _plugin_case(
        "FullyConnected",
        name if group == "mnist" else "fc",
        f"{shape_text(shape)}->{outputs}",
        (dtype, group, batch, graph_batch),
        inputs=[shape],
        outputs=[(n, outputs)],
        fields=(
            f"weights=rand:{outputs * k},7,-0.05,0.05;bias=rand:{outputs},11,-0.5,0.5;num_outputs=i:{outputs}"
        ),
        torch_op={"op": "linear", "k": k, "m": outputs},
        peers=["F.linear", "torch.matmul"],
        flops=2 * n * k * outputs,
        extra_bytes=(outputs * k + outputs) * DTYPE_BYTES[dtype],
        note="F.linear with bias is the peer; torch.matmul (cuBLAS GEMM, no bias) is the GEMM throughput",
    )


def concat_case(dtype, rows, cols, group, batch=None, graph_batch=0, note="") -> Case:
    shape = (rows, cols)
    return _plugin_case(
        "ConcatCopy",
        "concat_copy",
        f"2x{shape_text(shape)}",
        (dtype, group, batch, graph_batch),
        inputs=[shape, shape],
        outputs=[(2 * rows, cols), shape],
        fields="",
        torch_op={"op": "concat_copy"},
        peers=["torch.cat+clone"],
        note=note or "bytes moved: both inputs read once, both outputs written (what a fused kernel moves)",
    )


def swiglu_case(dtype, shape, group, target=None, batch=None, graph_batch=0, note="") -> Case:
    prefix = f"mnist/b{batch}/swiglu" if group == "mnist" else "swiglu"
    return Case(
        id=f"{prefix}/{dtype}/{shape_text(shape)}",
        family="SwiGLUSplit",
        plugin="SwiGLUSplit",
        dtype=dtype,
        inputs=[shape],
        outputs=[(*shape[:-1], shape[-1] // 2)],
        fields="",
        group=group,
        graph_batch=graph_batch,
        torch_op={"op": "swiglu"},
        peers=["F.silu(a)*b"],
        targets=[target] if target else [],
        batch=batch,
        note=note or "a Triton kernel (plugins/swiglu/kernel.py), compiled ahead of time",
    )


def rms_norm_case(dtype, rows, width, group, target=None, batch=None, graph_batch=0, note="") -> Case:
    return _plugin_case(
        "RmsNormLastAxis",
        "rms_norm",
        f"{rows}x{width}",
        (dtype, group, batch, graph_batch),
        inputs=[(rows, width), (width,)],
        outputs=[(rows, width)],
        fields="eps=f:1e-6",
        torch_op={"op": "rms_norm", "eps": 1e-6},
        peers=["F.rms_norm"],
        targets=[target] if target else [],
        note=note,
    )


def attention_case(dtype, shape, causal, group, batch=None, graph_batch=0, peer_ratio=PEER_RATIO) -> Case:
    """FlashAttentionTriton at q = k = v = `shape` [B, H, S, D]: 4 B H S^2 D flops (half of them causal)."""
    b, h, s, d = shape
    return _plugin_case(
        "FlashAttentionTriton",
        "attention",
        shape_text(shape) + ("/causal" if causal else ""),
        (dtype, group, batch, graph_batch),
        inputs=[shape, shape, shape],
        outputs=[shape],
        fields=f"causal=i:{int(causal)}",
        torch_op={"op": "sdpa", "causal": bool(causal)},
        peers=["F.scaled_dot_product_attention"],
        flops=4 * b * h * s * s * d // (2 if causal else 1),
        peer_ratio=peer_ratio,
        note="a Triton kernel (plugins/flash_attention/kernel.py), compiled ahead of time",
    )


def transformer_cases() -> list[Case]:
    """RMSNorm and attention: large shapes (roofline, long sequences) and a ViT block's serving sizes."""
    cases = []
    for shape in RMS_NORM_LARGE:
        for dtype in TRANSFORMER_DTYPES:
            t = Target("RMSNorm >= 90% of copy bandwidth", "pct_copy", ">=", 90.0)
            cases.append(rms_norm_case(dtype, *shape, "large", t))
    for seq, head in ATTENTION_LONG:
        for dtype in ("fp16", "bf16"):
            for causal in (False, True):
                c = attention_case(
                    dtype,
                    (1, ATTENTION_LONG_HEADS, seq, head),
                    causal,
                    "large",
                    peer_ratio=ATTENTION_LONG_RATIO,
                )
                name = f"attention >= {ATTENTION_LONG_RATIO}x F.scaled_dot_product_attention, long sequences"
                c.targets.append(Target(name, "speed_ratio", ">=", ATTENTION_LONG_RATIO, peer=c.peers[0]))
                cases.append(c)
    for batch in MNIST_BATCHES:
        for dtype in TRANSFORMER_DTYPES:
            g = MNIST_GRAPH_BATCH
            cases.append(
                rms_norm_case(dtype, batch * VIT_TOKENS, VIT_WIDTH, "mnist", batch=batch, graph_batch=g)
            )
            shape = (batch, VIT_HEADS, VIT_TOKENS, VIT_WIDTH // VIT_HEADS)
            cases.append(attention_case(dtype, shape, False, "mnist", batch=batch, graph_batch=g))
    for c in cases:
        if c.batch == 1:
            c.targets.append(
                Target("MNIST batch 1: <= 5 us per enqueue (CUDA graph)", "median_us", "<=", 5.0)
            )
    for shape in SWIGLU_LARGE:  # SwiGLUSplit's BF16 variants (its FP32/FP16 cases are build_cases')
        t = Target("SwiGLU (Triton) >= 90% of copy bandwidth", "pct_copy", ">=", 90.0)
        cases.append(swiglu_case("bf16", shape, "large", t))
    return cases


def build_cases() -> list[Case]:
    """Every case of the full run, targets first: large memory-bound shapes, FC, then the MNIST sizes."""
    cases: list[Case] = []
    for dtype in ("fp32", "fp16"):
        for shape in ((65536, 1024), (524288, 128), (16384, 4096)):
            t = Target("L2Normalize >= 85% of copy bandwidth", "pct_copy", ">=", 85.0)
            cases.append(l2_case(dtype, shape, "large", t))
    for dtype in ("fp32", "fp16"):
        t = Target("PReLU >= 90% of copy bandwidth", "pct_copy", ">=", 90.0)
        cases.append(prelu_case(dtype, LARGE_NCHW, "large", t))
    for dtype in ("fp32", "fp16"):
        t = Target("LeakyReLU >= 95% of copy bandwidth", "pct_copy", ">=", 95.0)
        cases.append(leaky_case(dtype, LARGE_NCHW, "large", t))
    for mode in ("max", "average"):
        float_ids = {}
        for dtype in ("fp32", "fp16"):
            c = pool_case(dtype, mode, LARGE_NCHW, "large")
            c.targets.append(Target(f"Pool {mode} >= 80% of copy bandwidth", "pct_copy", ">=", 80.0))
            float_ids[dtype] = c.id
            cases.append(c)
        c = pool_case("int8", mode, LARGE_NCHW, "large")
        c.versus = [float_ids["fp32"], float_ids["fp16"]]
        c.targets.append(Target(f"INT8 Pool {mode} >= 70% of copy bandwidth", "pct_copy", ">=", 70.0))
        c.targets.append(
            Target(
                f"INT8 Pool {mode} >= 3x faster than our FP32 Pool",
                "speedup_vs",
                ">=",
                3.0,
                versus=float_ids["fp32"],
            )
        )
        cases.append(c)
    for dtype in ("fp32", "fp16"):
        c = fc_case(dtype, (4096, 800), 500, "large")
        c.targets.append(
            Target("FullyConnected >= 0.95x F.linear with bias", "speed_ratio", ">=", 0.95, peer="F.linear")
        )
        cases.append(c)
    for dtype in ("fp32", "fp16"):
        cases.append(concat_case(dtype, 32768, 1024, "large"))
    for shape in SWIGLU_LARGE:
        for dtype in ("fp32", "fp16"):
            t = Target("SwiGLU (Triton) >= 90% of copy bandwidth", "pct_copy", ">=", 90.0)
            cases.append(swiglu_case(dtype, shape, "large", t))

    extra = "not a LeNet layer: the plugin at a serving size, for the per-enqueue latency"
    for batch in MNIST_BATCHES:
        g = MNIST_GRAPH_BATCH
        group: list[Case] = []
        for dtype in ("fp32", "fp16", "int8"):
            lenet = lenet_cases(dtype, batch)
            pool1, pool2 = lenet["pool1"], lenet["pool2"]
            group += [pool1, pool2]
            if dtype == "int8":
                for c in (pool1, pool2):
                    c.versus = [c.id.replace("/int8/", "/fp32/"), c.id.replace("/int8/", "/fp16/")]
                continue
            group += [lenet["fc1"], lenet["fc2"], lenet["prelu"]]
            group.append(
                leaky_case(dtype, (batch, LENET_FC1), "mnist", batch=batch, graph_batch=g, note=extra)
            )
            l2_note = "the l2norm serving model's widest vector (4096); " + extra
            group.append(l2_case(dtype, (batch, 4096), "mnist", batch=batch, graph_batch=g, note=l2_note))
            group.append(concat_case(dtype, batch, 500, "mnist", batch=batch, graph_batch=g, note=extra))
            group.append(swiglu_case(dtype, (batch, SWIGLU_MNIST_WIDTH), "mnist", batch=batch, graph_batch=g))
        if batch == 1:
            for c in group:
                c.targets.append(
                    Target("MNIST batch 1: <= 5 us per enqueue (CUDA graph)", "median_us", "<=", 5.0)
                )
        cases += group
    cases += transformer_cases()
    for c in cases:
        if c.peer_ratio == PEER_RATIO:
            c.targets += [Target(PEER_TARGET, "speed_ratio", ">=", PEER_RATIO, peer=peer) for peer in c.peers]
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    return cases


def lenet_cases(dtype: str, batch: int) -> dict[str, Case]:
    """LeNet's plugin layers at one batch size (INT8: pools only), timed as CUDA graphs of 100 enqueues."""
    g = MNIST_GRAPH_BATCH
    cases = {
        "pool1": pool_case(dtype, "max", (batch, *LENET_CONV1), "mnist", "pool1", batch, g),
        "pool2": pool_case(dtype, "max", (batch, *LENET_CONV2), "mnist", "pool2", batch, g),
    }
    if dtype != "int8":
        fc1_input = (batch, *pool_out((1, *LENET_CONV2))[1:])
        cases["fc1"] = fc_case(dtype, fc1_input, LENET_FC1, "mnist", "fc1", batch, g)
        cases["fc2"] = fc_case(dtype, (batch, LENET_FC1), LENET_FC2, "mnist", "fc2", batch, g)
        cases["prelu"] = prelu_case(dtype, (batch, LENET_FC1), "mnist", batch=batch, graph_batch=g)
    return cases


def build_chains() -> list[lenet_chain.Chain]:
    """The plugin part of LeNet's forward at every MNIST batch size, FP32 and FP16 (serving-size round)."""
    chains = []
    for batch in MNIST_BATCHES:
        for dtype in ("fp32", "fp16"):
            c = lenet_cases(dtype, batch)
            chains.append(
                lenet_chain.make_chain(dtype, batch, c["pool1"], c["pool2"], c["fc1"], c["prelu"], c["fc2"])
            )
    return chains


QUICK_IDS = (
    "l2normalize/fp32/65536x1024",
    "prelu/fp16/256x64x112x112",
    "pool/max/fp32/256x64x112x112",
    "pool/max/int8/256x64x112x112",
    "fc/fp32/4096x800->500",
    "mnist/b1/pool1/max/fp32/1x20x24x24",
    "mnist/b1/fc1/fp32/1x50x4x4->500",
    "mnist/b1/prelu/fp32/1x500",
    "lenet_chain/b1/fp32",
)


def select_chains(chains: list[lenet_chain.Chain], quick: bool, only: list[str]) -> list[lenet_chain.Chain]:
    return [
        c for c in chains if (not quick or c.id in QUICK_IDS) and (not only or any(o in c.id for o in only))
    ]


def select_cases(cases: list[Case], quick: bool, only: list[str]) -> list[Case]:
    """--quick and --only filters; the cases an INT8 pool is compared with come along."""
    by_id = {c.id: c for c in cases}
    chosen = [
        c for c in cases if (not quick or c.id in QUICK_IDS) and (not only or any(o in c.id for o in only))
    ]
    wanted = {c.id for c in chosen}
    for c in chosen:
        wanted.update(v for v in c.versus if v in by_id)
    return [c for c in cases if c.id in wanted]
