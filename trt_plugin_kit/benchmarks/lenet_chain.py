"""The plugin part of LeNet's forward as one CUDA graph per forward, against PyTorch (serving-size round).

pool1, pool2, fc1, PReLU and fc2 with the shapes of trt_plugin_kit/models/lenet.py; the convolution outputs
(conv1's
[N, 20, 24, 24] for pool1, conv2's [N, 50, 8, 8] for pool2) are the chain's inputs, since the convolutions are
not plugins. The steps are the MNIST cases of :mod:`.cases` (same plugins, fields and shapes), joined by
their sources. libplugin_bench.so's ``tpk_bench_chain`` captures one forward per graph (every plugin through
TensorRT's call sequence, FC tactics timed in a graph first) and times its replays as the cases are timed; it
also times a graph of as many empty-kernel nodes: the device's launch-latency floor for that graph. PyTorch's
same operations are captured one forward per ``torch.cuda.CUDAGraph`` and timed the same way, on as many
rotating input sets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

CHAIN_MAX_SETS = 128  # graphs per measurement (one per rotating input set); at batch 1 the inputs fit in L2
TORCH_PEER = "PyTorch graph"
CHAIN_TARGET = "LeNet plugin chain at least as fast as PyTorch's (one CUDA graph per forward)"
# Issue 42: at batch 1 the chain's time over its launch floor (a graph of as many empty-kernel nodes).
FLOOR_TARGET = "LeNet plugin chain at batch 1 within 1.4x of its launch floor"
FLOOR_BATCH, FLOOR_RATIO = 1, 1.4


@dataclass
class ChainStep:
    case: object  # cases.Case: plugin, fields, shapes, PyTorch op
    sources: tuple[str, ...]  # per input: "in" (a chain input) or "k.o" (output o of step k)


@dataclass
class Chain:
    id: str
    dtype: str
    batch: int
    steps: list[ChainStep]

    @property
    def spec(self) -> str:
        """libplugin_bench.so's chain spec: plugin#fields#io#sources per step, separated by '|'."""
        return "|".join(
            f"{s.case.plugin}#{s.case.fields}#{s.case.io_spec}#{','.join(s.sources)}" for s in self.steps
        )

    def input_shapes(self) -> list[tuple[int, ...]]:
        return [s.case.inputs[i] for s in self.steps for i, src in enumerate(s.sources) if src == "in"]

    def check(self) -> list[str]:
        """Every internal source is an earlier step's output of the shape the consumer declares."""
        problems = []
        for index, step in enumerate(self.steps):
            for i, src in enumerate(step.sources):
                if src == "in":
                    continue
                k, _, o = src.partition(".")
                if not (k.isdigit() and o.isdigit() and int(k) < index):
                    problems.append(f"{self.id}: step {index} source {src!r} is not an earlier output")
                    continue
                produced = tuple(self.steps[int(k)].case.outputs[int(o)])
                if produced != tuple(step.case.inputs[i]):
                    problems.append(f"{self.id}: step {index} input {i} {step.case.inputs[i]} != {produced}")
        return problems


def make_chain(dtype: str, batch: int, pool1, pool2, fc1, prelu, fc2) -> Chain:
    steps = [
        ChainStep(pool1, ("in",)),  # conv1's output
        ChainStep(pool2, ("in",)),  # conv2's output
        ChainStep(fc1, ("1.0",)),
        ChainStep(prelu, ("2.0",)),
        ChainStep(fc2, ("3.0",)),
    ]
    return Chain(f"lenet_chain/b{batch}/{dtype}", dtype, batch, steps)


def torch_forward(torch, chain: Chain, dtype):
    """PyTorch's forward of the same steps (its own random weights, as the per-case peers)."""
    F = torch.nn.functional
    ops = []
    for step in chain.steps:
        op = step.case.torch_op
        if op["op"] == "max_pool2d":
            ops.append(lambda x: F.max_pool2d(x, 2, 2))
        elif op["op"] == "linear":
            weight = ((torch.rand(op["m"], op["k"], device="cuda") - 0.5) * 0.1).to(dtype)
            bias = ((torch.rand(op["m"], device="cuda") - 0.5) * 1.0).to(dtype)
            ops.append(lambda x, w=weight, b=bias: F.linear(x.flatten(1), w, b))
        elif op["op"] == "prelu":
            slopes = (torch.rand(op["channels"], device="cuda") * 0.25 + 0.05).to(dtype)
            ops.append(lambda x, s=slopes: F.prelu(x, s))
        else:
            raise ValueError(f"{chain.id}: no PyTorch op for {op}")

    def forward(*inputs):
        chain_inputs = iter(inputs)
        outputs = []
        for fn, step in zip(ops, chain.steps, strict=True):
            args = [next(chain_inputs) if s == "in" else outputs[int(s.split(".")[0])] for s in step.sources]
            outputs.append(fn(*args))
        return outputs  # all kept, as the plugin chain keeps every output

    return forward


def measure(lib, runner, chain: Chain, repetitions: int, options: str) -> dict:
    """The plugin chain (libplugin_bench.so) and PyTorch's (``runner``: a TorchRunner, or None)."""
    rec = {
        "id": chain.id,
        "dtype": chain.dtype,
        "batch": chain.batch,
        "steps": [s.case.id for s in chain.steps],
        "inputs": [list(s) for s in chain.input_shapes()],
        "plugin_result": None,
        "floor": None,
        "peers": [],
        "error": None,
        "skipped": None,
    }
    result = lib.chain(chain.spec, repetitions, options)
    rec["plugin_result"] = dict(result["forward"])
    for key in ("graph_nodes", "kernel_nodes", "rotation_sets", "input_bytes", "tactics"):
        rec["plugin_result"][key] = result[key]
    rec["floor"] = result["floor"]
    if runner is None:
        return rec
    peer = {"name": TORCH_PEER, "kind": "torch"}
    try:
        dtype = runner.dtype(chain.dtype)
        sets = int(result["rotation_sets"])  # as many rotating sets as the plugin chain had
        columns = [runner.random_slab(tuple(shape), dtype, sets) for shape in chain.input_shapes()]
        args = list(zip(*columns, strict=True))
        peer.update(runner.time(torch_forward(runner.torch, chain, dtype), args, repetitions, 1))
        peer["speed_ratio"] = peer["median_us"] / rec["plugin_result"]["median_us"]
    except Exception as error:  # recorded with the chain; the run goes on
        peer["error"] = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:300]}"
    finally:
        runner.release()
    rec["peers"].append(peer)
    return rec


def evaluate(records: list[dict]) -> list[dict]:
    rows = []
    for rec in records:
        peer = next((p for p in rec.get("peers", []) if p["name"] == TORCH_PEER), {})
        value = peer.get("speed_ratio")
        status = "NOT MEASURED" if value is None else ("PASS" if value >= 1.0 else "FAIL")
        rows.append(
            {
                "target": CHAIN_TARGET,
                "case": rec["id"],
                "metric": "speed_ratio",
                "op": ">=",
                "threshold": 1.0,
                "value": value,
                "status": status,
                "versus": None,
                "peer": TORCH_PEER,
            }
        )
        if rec.get("batch") == FLOOR_BATCH:
            rows.append(floor_target(rec))
    return rows


def floor_target(rec: dict) -> dict:
    mine, floor = (rec.get("plugin_result") or {}).get("median_us"), (rec.get("floor") or {}).get("median_us")
    value = mine / floor if mine and floor else None
    status = "NOT MEASURED" if value is None else ("PASS" if value <= FLOOR_RATIO else "FAIL")
    return {
        "target": FLOOR_TARGET,
        "case": rec["id"],
        "metric": "floor_ratio",
        "op": "<=",
        "threshold": FLOOR_RATIO,
        "value": value,
        "status": status,
        "versus": None,
        "peer": None,
    }


def _us(m: dict | None) -> str:
    if not m or m.get("median_us") is None:
        return "—"
    return f"{m['median_us']:.2f} ({m['p10_us']:.2f} – {m['p90_us']:.2f})"


def markdown(records: list[dict]) -> list[str]:
    if not records:
        return []
    lines = [
        "## LeNet plugin chain: one CUDA graph per forward",
        "",
        "pool1, pool2, fc1, PReLU, fc2 (LeNet's shapes; conv1's and conv2's outputs are the inputs) "
        "captured as one CUDA graph per forward, each forward on its own rotating input set (at most "
        f"{CHAIN_MAX_SETS} sets), against the same operations in PyTorch captured the same way. Launch "
        "floor: a graph of as many empty-kernel nodes (one warp each), timed the same way. µs per forward, "
        "median (p10 – p90).",
        "",
        "| chain | plugin graph µs | PyTorch graph µs | plugin speed-up | graph nodes (kernels) "
        "| launch floor µs | rotating sets | FC tactics (fc1, fc2) |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for rec in records:
        mine = rec.get("plugin_result") or {}
        peer = (rec.get("peers") or [{}])[0]
        if rec.get("error") or rec.get("skipped"):
            lines.append(f"| `{rec['id']}` | {rec.get('error') or rec.get('skipped')} | | | | | | |")
            continue
        ratio = peer.get("speed_ratio")
        torch_text = peer.get("error") or _us(peer)
        tactics = mine.get("tactics") or []
        fc_tactics = ", ".join(str(t) for t, s in zip(tactics, rec["steps"], strict=False) if "/fc" in s)
        lines.append(
            f"| `{rec['id']}` | {_us(mine)} | {torch_text} | "
            f"{'—' if ratio is None else f'{ratio:.2f}x'} | {mine.get('graph_nodes', '—')} "
            f"({mine.get('kernel_nodes', '—')}) | {_us(rec.get('floor'))} | "
            f"{mine.get('rotation_sets', '—')} | {fc_tactics} |"
        )
    lines.append("")
    return lines


def input_bytes(chain: Chain, dtype_bytes: dict[str, int]) -> int:
    return sum(math.prod(s) for s in chain.input_shapes()) * dtype_bytes[chain.dtype]
