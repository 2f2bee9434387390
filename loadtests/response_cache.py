"""`python -m loadtests.response_cache`: Triton's response cache measured with perf_analyzer, on and off, on
repeated and on unique inputs, for the kit's deterministic models (mnist, l2norm, mnist_pipeline).

CPU servers as `make serve` starts them (the edge in front), one after the other, ROUNDS rounds of one without
a cache and one with `--cache-config=local,size=CACHE_BYTES`, on a copy of the model repository whose CPU
configurations carry `response_cache { enable: true }` (without a cache Triton serves such a model uncached).
Against each,
perf_analyzer (as `make perf` runs it, gRPC, concurrency CONCURRENCY) sends every model
  repeated  one sample over and over: after the first request every response can come from the cache;
  unique    UNIQUE_ROWS[model] distinct samples (the sample digits with noise; random vectors), so that a
            request repeats only after the run has cycled through them all (the hit ratio, read from
            Triton's nv_cache_num_hits_per_model / nv_cache_num_misses_per_model, says how far it got).
The cache's memory: nv_cache_util x CACHE_BYTES after the runs, per entry. Written: --out/response-cache.md
and .json (records/response-cache/ by default).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from loadtests.perf import data as perf_data
from loadtests.perf import tool as perf_tool
from loadtests.perf.sweep import BATCH_SIZES, SweepSettings, measure
from trt_plugin_kit.interface import (
    L2NORM,
    L2NORM_INPUT,
    MNIST,
    MNIST_INPUT,
    MNIST_PIPELINE,
    MODEL_REPOSITORY,
    PIPELINE_INPUT,
    REPO_ROOT,
)
from trt_plugin_kit.serving.host import Ports
from trt_plugin_kit.serving.preprocess import decode_digit
from trt_plugin_kit.serving.server import TritonServer
from trt_plugin_kit.tritonserver.metrics import read_metrics
from trt_plugin_kit.tritonserver.options import ServerLocation

PROG = "python -m loadtests.response_cache"
DEFAULT_OUT = REPO_ROOT / "records" / "response-cache"
MODELS = (MNIST, L2NORM, MNIST_PIPELINE)
CACHE_BYTES = 64 << 20
CACHE_FLAG = f"--cache-config=local,size={CACHE_BYTES}"
CONCURRENCY = 4
# Odd counts: perf_analyzer fills a batch of B rows from consecutive samples, so with an odd count (coprime
# with the batch sizes 8 and 4) each of the N possible starting samples makes another request.
UNIQUE_ROWS = {MNIST: 6001, L2NORM: 8001, MNIST_PIPELINE: 5001}
ROUNDS = 2  # off, on, off, on: the machine's load drifts; each cell is the mean of its rounds
# Windows of 2 s, any spread between them accepted: on the shared machine a stricter check left runs with no
# number at all; the rounds and Triton's own cache timings carry the comparison.
SETTINGS = SweepSettings(measurement_ms=2000, stability_percent=1000, max_trials=3, timeout_s=240)
RESPONSE_CACHE = "\nresponse_cache {\n  enable: true\n}\n"
HITS, MISSES = "nv_cache_num_hits_per_model", "nv_cache_num_misses_per_model"
# Triton's own clock of the cache (µs, per model): lookups that hit; lookups that missed plus the insertion.
HIT_US, MISS_US = "nv_cache_hit_duration_per_model", "nv_cache_miss_duration_per_model"
REQUEST_US, SUCCESS = "nv_inference_request_duration_us", "nv_inference_request_success"
COUNTERS = (HITS, MISSES, HIT_US, MISS_US, REQUEST_US, SUCCESS)
UTIL, ENTRIES = "nv_cache_util", "nv_cache_num_entries"  # the cache's own, on a server with one
# The cache's metric names this tool and the docs use: exported only where the cache is on (the monitoring
# test, which reads make serve's server, takes them from here; the response cache test checks them).
CACHE_METRICS = (HITS, MISSES, HIT_US, MISS_US, UTIL, ENTRIES)


def cached_repository(workdir: Path) -> Path:
    """A copy of the model repository with the response cache enabled in each measured model's CPU config
    (the ensemble has one config); ../models beside it, as the configs' relative ONNX paths expect."""
    repository = workdir / "model_repository"
    shutil.copytree(MODEL_REPOSITORY, repository, ignore=shutil.ignore_patterns("__pycache__", "*.plan"))
    (workdir / "models").symlink_to(REPO_ROOT / "models")
    for model in MODELS:
        config = repository / model / "configs" / "cpu.pbtxt"
        config = config if config.is_file() else repository / model / "config.pbtxt"
        if "response_cache" not in config.read_text():
            config.write_text(config.read_text() + RESPONSE_CACHE)
    return repository


def b64(data: bytes) -> dict[str, str]:
    return {"b64": base64.b64encode(data).decode()}


def png_bytes(image: np.ndarray) -> bytes:
    from PIL import Image  # noqa: PLC0415

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return buffer.getvalue()


def unique_data(model: str, rows: int) -> dict:
    """`rows` distinct samples: the sample digits with noise (mnist: tensors; the pipeline: PNG files),
    random vectors (l2norm)."""
    rng = np.random.default_rng(1)
    pngs = perf_data.sample_pngs()
    if model == L2NORM:
        vectors = rng.standard_normal((rows, perf_data.DEFAULT_L2NORM_DIM)).astype("<f4")
        return {"data": [{L2NORM_INPUT: {"content": b64(v.tobytes()), "shape": [v.size]}} for v in vectors]}
    entries = []
    for i in range(rows):
        noise = rng.normal(0, 0.02, (28, 28))
        if model == MNIST:
            digit = decode_digit(pngs[i % len(pngs)]).reshape(28, 28) + noise
            entries.append({MNIST_INPUT: b64(np.clip(digit, -1, 3).astype("<f4").tobytes())})
        else:
            from PIL import Image  # noqa: PLC0415

            gray = np.asarray(Image.open(io.BytesIO(pngs[i % len(pngs)])).convert("L"), dtype=np.float64)
            noisy = np.clip(gray + 255 * noise, 0, 255).astype(np.uint8)
            entries.append({PIPELINE_INPUT: b64(perf_data.bytes_element(png_bytes(noisy)))})
    return {"data": entries}


def input_files(workdir: Path) -> dict[tuple[str, str], Path]:
    """{(model, "repeated" | "unique"): perf_analyzer --input-data file}."""
    shipped = perf_data.write_input_data(workdir / "data")
    files = {}
    for model in MODELS:
        repeated = json.loads(shipped[model].read_text())
        repeated["data"] = repeated["data"][:1]
        files[(model, "repeated")] = workdir / "data" / f"{model}-repeated.json"
        files[(model, "repeated")].write_text(json.dumps(repeated))
        files[(model, "unique")] = workdir / "data" / f"{model}-unique.json"
        files[(model, "unique")].write_text(json.dumps(unique_data(model, UNIQUE_ROWS[model])))
    return files


def cache_counts(metrics_url: str) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Per model counters, and the cache's own gauges (no model label)."""
    values = read_metrics(metrics_url, (*COUNTERS, UTIL, ENTRIES))
    gauges = {name: values[name][""] for name in (UTIL, ENTRIES) if "" in values[name]}
    return {name: values[name] for name in COUNTERS}, gauges


def run_server(cache: bool, repository: Path, files: dict, workdir: Path, perf) -> list[dict]:
    """Every model with both inputs against one server; rows of measurements with the cache's counts."""
    label = "cache on" if cache else "cache off"
    server = TritonServer(variant="cpu", ports=Ports.free("127.0.0.1"), model_repository=repository,
                          log_file=workdir / f"tritonserver-{label.replace(' ', '-')}.log",
                          extra_args=[CACHE_FLAG] if cache else [], exit_timeout_s=3)  # fmt: skip
    rows = []
    try:
        server.start()
        server.wait_until_ready(240)
        location = ServerLocation("127.0.0.1", server.ports.http, server.ports.grpc, server.ports.metrics)
        for model in MODELS:
            for inputs in ("repeated", "unique"):
                before, _ = cache_counts(server.metrics_url)
                row = measure(perf, model, "grpc", CONCURRENCY, location, files[(model, inputs)], workdir,
                              SETTINGS, target=f"{label}-{inputs}")  # fmt: skip
                after, unlabelled = cache_counts(server.metrics_url)
                delta = {name: after[name].get(model, 0) - before[name].get(model, 0) for name in COUNTERS}
                rows.append({"model": model, "inputs": inputs, "cache": cache, "error": row.error,
                             "infer_per_s": row.values.get("infer_per_s"), "p50_us": row.values.get("p50_us"),
                             "p99_us": row.values.get("p99_us"), "hits": delta[HITS], "misses": delta[MISSES],
                             "hit_us": delta[HIT_US], "miss_us": delta[MISS_US],
                             "request_us": delta[REQUEST_US], "requests": delta[SUCCESS],
                             "cache_util": unlabelled.get(UTIL),
                             "cache_entries": unlabelled.get(ENTRIES)})  # fmt: skip
    finally:
        server.stop()
    return rows


def merged(rows: list[dict], model: str, inputs: str, cache: bool) -> dict:
    """One cell: the mean of its rounds' throughput and p99 and their range; the counters summed."""
    mine = [r for r in rows if (r["model"], r["inputs"], r["cache"]) == (model, inputs, cache)]
    measured = [r for r in mine if not r["error"]]
    cell = {
        name: sum(r[name] for r in mine)
        for name in ("hits", "misses", "hit_us", "miss_us", "request_us", "requests")
    }
    if measured:
        speeds = [r["infer_per_s"] for r in measured]
        cell |= {"infer_per_s": sum(speeds) / len(speeds), "range": (min(speeds), max(speeds)),
                 "p99_us": sum(r["p99_us"] for r in measured) / len(measured)}  # fmt: skip
    return cell


def speed(cell: dict) -> str:
    if "infer_per_s" not in cell:
        return "–"
    low, high = cell["range"]
    return f"{cell['infer_per_s']:,.0f} ({low:,.0f}–{high:,.0f})"


def per(cell: dict, total: str, count: str, digits: int = 0) -> str:
    return fmt(cell[total] / cell[count], digits) if cell.get(count) else "–"


def fmt(value, digits=0, suffix="") -> str:
    return "–" if value is None else f"{value:,.{digits}f}{suffix}"


def markdown(report: dict) -> str:
    lines = [
        "# Triton's response cache: repeated and unique inputs, cache off and on",
        "",
        f"Command: `{report['command']}`; {report['when']}; perf_analyzer: {report['perf']}; gRPC, "
        f"concurrency {CONCURRENCY}, requests of {', '.join(f'{m} {BATCH_SIZES[m]}' for m in MODELS)} rows; "
        f"cache `{CACHE_FLAG}`; servers without and with the cache in turn, {ROUNDS} rounds (off, on, off, "
        "on); throughput: the mean of the rounds that measured (their range); a shared 2-core machine, other "
        "work beside it: throughput swings between rounds, Triton's own clock of the cache (second table) "
        "does not.",
        "",
        "| model | inputs | off: inferences/s | on: inferences/s | on / off | hit ratio (on) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    cells = {
        key: merged(report["rows"], *key)
        for key in {(r["model"], r["inputs"], r["cache"]) for r in report["rows"]}
    }
    for model in MODELS:
        for inputs in ("repeated", "unique"):
            off, on = cells.get((model, inputs, False), {}), cells.get((model, inputs, True), {})
            ratio = (
                on["infer_per_s"] / off["infer_per_s"]
                if "infer_per_s" in on and "infer_per_s" in off
                else None
            )
            lookups = on.get("hits", 0) + on.get("misses", 0)
            hit_ratio = 100 * on.get("hits", 0) / lookups if lookups else None
            lines.append(f"| {model} | {inputs} | {speed(off)} | {speed(on)} | {fmt(ratio, 2, 'x')} | "
                         f"{fmt(hit_ratio, 1, ' %')} |")  # fmt: skip
    lines += [
        "",
        "What a request costs on the server (µs, Triton's metrics over the same runs): the request without "
        "the cache, a hit (the lookup: the whole request when it hits), a miss (the lookup and the "
        "insertion, on top of the request's own work).",
        "",
        "| model | request, cache off | hit | miss |",
        "|---|---:|---:|---:|",
    ]
    for model in MODELS:
        off = merged(report["rows"], model, "unique", False)
        hits = merged(report["rows"], model, "repeated", True)
        misses = merged(report["rows"], model, "unique", True)
        lines.append(f"| {model} | {per(off, 'request_us', 'requests')} | {per(hits, 'hit_us', 'hits', 1)} | "
                     f"{per(misses, 'miss_us', 'misses', 1)} |")  # fmt: skip
    memory = report.get("memory", {})
    lines += [
        "",
        f"Memory: after all runs the cache held {fmt(memory.get('entries'))} entries in "
        f"{fmt(memory.get('bytes'))} bytes of its {CACHE_BYTES:,} ({fmt(memory.get('util_pct'), 2, ' %')}); "
        "an entry is the response's output tensors plus its key (a hash of the request's inputs).",
    ]
    errors = [f"{r['model']} {r['inputs']} cache {'on' if r['cache'] else 'off'} round {r['round'] + 1}: "
              f"{r['error']}" for r in report["rows"] if r["error"]]  # fmt: skip
    if errors:
        lines += ["", "Runs without a measurement: " + "; ".join(errors)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    try:
        perf = perf_tool.find("auto")
    except perf_tool.ToolUnavailable as error:
        print(f"{PROG}: {error}")
        return 3
    workdir = Path(tempfile.mkdtemp(prefix="response-cache-"))
    try:
        repository = cached_repository(workdir)
        files = input_files(workdir)
        rows = []
        for round_ in range(ROUNDS):
            for cache in (False, True):
                rows += [
                    row | {"round": round_} for row in run_server(cache, repository, files, workdir, perf)
                ]
        last = rows[-1]
        memory = {"entries": last["cache_entries"], "util_pct": 100 * (last["cache_util"] or 0),
                  "bytes": (last["cache_util"] or 0) * CACHE_BYTES}  # fmt: skip
        report = {"command": " ".join([PROG, *(argv if argv is not None else sys.argv[1:])]),
                  "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                  "perf": perf.describe().replace(f"{REPO_ROOT}/", ""), "rows": rows,
                  "memory": memory}  # fmt: skip
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "response-cache.json").write_text(json.dumps(report, indent=1) + "\n")
        (out / "response-cache.md").write_text(markdown(report))
        print(markdown(report))
        return 1 if any(r["error"] for r in rows) else 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
