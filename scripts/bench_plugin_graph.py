#!/usr/bin/env python3
"""How fast the CPU stand-in computes a plugin-flavour model, against the ways it could have been done.

On models/onnx/mnist_plugin.onnx (Conv, Softmax and five plugin nodes), one thread, batch 1 and 64: ONNX's
ReferenceEvaluator on the whole graph (trt_plugin_kit.models.onnx_eval, the test oracle), the stand-in's
segments (trt_plugin_kit.serving.plugin_graph: ONNX Runtime + the references) and, for scale, ONNX Runtime on
the native graph (what the `mnist` CPU model runs). Median seconds per call; writes
records/plugin-graph/plugin-graph-cpu.md.

    .venv/bin/python scripts/bench_plugin_graph.py --repeats 20
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one BLAS thread, as a Triton instance gets
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

from trt_plugin_kit.interface import ONNX_DIR, REPO_ROOT  # noqa: E402
from trt_plugin_kit.models import onnx_eval  # noqa: E402
from trt_plugin_kit.serving.plugin_graph import PluginGraph  # noqa: E402

RECORD = REPO_ROOT / "records" / "plugin-graph" / "plugin-graph-cpu.md"


def median_seconds(call, repeats: int) -> float:
    call()  # warm
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    plugin = onnx.load(ONNX_DIR / "mnist_plugin.onnx")
    graph = PluginGraph(plugin)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    native = ort.InferenceSession(
        str(ONNX_DIR / "mnist_native.onnx"), options, providers=["CPUExecutionProvider"]
    )
    images = np.random.default_rng(0).random((64, 1, 28, 28), dtype=np.float32)
    rows = []
    for batch in (1, 64):
        feed = {"image": images[:batch]}
        rows.append(
            (
                batch,
                median_seconds(lambda feed=feed: onnx_eval.run(plugin, feed), max(3, args.repeats // 10)),
                median_seconds(lambda feed=feed: graph.run(feed), args.repeats),
                median_seconds(lambda feed=feed: native.run(None, feed), args.repeats),
            )
        )
    lines = [
        "# The CPU stand-in's speed (scripts/bench_plugin_graph.py)",
        "",
        f"mnist_plugin.onnx, one thread, median seconds per call; {platform.machine()}, {os.cpu_count()} "
        "cores, shared with other work (one run).",
        "",
        "| batch | ReferenceEvaluator (whole graph) | stand-in: ONNX Runtime segments + references | "
        "ONNX Runtime, native graph |",
        "| --- | --- | --- | --- |",
        *(f"| {b} | {r:.4f} | {s:.4f} | {n:.4f} |" for b, r, s, n in rows),
        "",
    ]
    RECORD.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
