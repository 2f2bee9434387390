#!/usr/bin/env python3
"""What the edge costs: the same requests with the edge on and off, both protocols, in one run.

Starts two CPU servers on this machine, one behind the edge (as `make serve` runs it) and one with
`--edge off` (tritonserver itself on the public ports; for this measurement only), then, for each request
kind and protocol, sends requests from N concurrent clients for a fixed time to each, alternating rounds so
that machine load hits both alike. At saturation (enough clients to keep every core busy) the ratio of
throughputs is the edge's cost. With --python-grpc-front a third server runs the edge with its Python gRPC
front ($TRT_PLUGIN_KIT_EDGE_GRPC=off) for the gRPC requests, in the same alternating rounds: the compiled
front's gain measured under the same load. Writes records/edge/edge-overhead.{json,md}; the ratios of the
record it replaces are kept in the new one as "previous".

    .venv/bin/python scripts/bench_edge.py --seconds 10 --rounds 3 --concurrency 16
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import aiohttp
import grpc
import numpy as np
from tritonclient.grpc import service_pb2 as pb

from trt_plugin_kit.interface import REPO_ROOT, SAMPLES_DIR
from trt_plugin_kit.serving.edge.contract import NATIVE_GRPC_ENV
from trt_plugin_kit.serving.edge.native_front import native_binary
from trt_plugin_kit.serving.host import Ports
from trt_plugin_kit.serving.server import TritonServer

OUT_DIR = REPO_ROOT / "records" / "edge"
PYTHON_FRONT = "edge on, Python gRPC front"


def http_kinds() -> dict[str, tuple[str, bytes, dict]]:
    vector = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    l2norm = {"inputs": [{"name": "vector", "shape": [1, 512], "datatype": "FP32", "data": vector.tolist()}]}
    l2norm_binary = json.dumps(
        {"inputs": [{"name": "vector", "shape": [1, 512], "datatype": "FP32",
                     "parameters": {"binary_data_size": 2048}}]}
    ).encode()  # fmt: skip
    digit = (SAMPLES_DIR / "7.png").read_bytes()
    header = json.dumps(
        {"inputs": [{"name": "image_bytes", "shape": [1, 1], "datatype": "BYTES",
                     "parameters": {"binary_data_size": len(digit) + 4}}]}
    ).encode()  # fmt: skip
    return {
        "l2norm [1,512] JSON": ("/v2/models/l2norm/infer", json.dumps(l2norm).encode(), {}),
        "l2norm [1,512] binary": (
            "/v2/models/l2norm/infer",
            l2norm_binary + vector.tobytes(),
            {"Inference-Header-Content-Length": str(len(l2norm_binary))},
        ),
        "mnist_pipeline PNG": (
            "/v2/models/mnist_pipeline/infer",
            header + len(digit).to_bytes(4, "little") + digit,
            {"Inference-Header-Content-Length": str(len(header))},
        ),
    }


def grpc_kinds() -> dict[str, bytes]:
    vector = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    l2norm = pb.ModelInferRequest(model_name="l2norm")
    l2norm.inputs.add(name="vector", datatype="FP32", shape=[1, 512])
    l2norm.raw_input_contents.append(vector.tobytes())
    digit = (SAMPLES_DIR / "7.png").read_bytes()
    pipeline = pb.ModelInferRequest(model_name="mnist_pipeline")
    pipeline.inputs.add(name="image_bytes", datatype="BYTES", shape=[1, 1])
    pipeline.raw_input_contents.append(len(digit).to_bytes(4, "little") + digit)
    return {
        "l2norm [1,512] raw": l2norm.SerializeToString(),
        "mnist_pipeline PNG": pipeline.SerializeToString(),
    }


async def hammer_http(base: str, path: str, body: bytes, headers: dict, seconds: float, concurrency: int):
    latencies, failures = [], 0
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def worker():
            nonlocal failures
            while time.monotonic() < deadline:
                started = time.perf_counter()
                async with session.post(base + path, data=body, headers=headers) as response:
                    await response.read()
                    failures += response.status != 200
                latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, failures


async def hammer_grpc(target: str, payload: bytes, seconds: float, concurrency: int):
    latencies, failures = [], 0
    deadline = time.monotonic() + seconds
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")

        async def worker():
            nonlocal failures
            while time.monotonic() < deadline:
                started = time.perf_counter()
                try:
                    await call(payload, timeout=30)
                except grpc.aio.AioRpcError:
                    failures += 1
                latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, failures


def summarize(
    latencies: list[float], failures: int, seconds: float, server_cpu: float, client_cpu: float
) -> dict:
    ms = sorted(1000 * x for x in latencies)
    return {
        "requests_per_s": round(len(ms) / seconds, 1),
        "p50_ms": round(statistics.median(ms), 2),
        "p99_ms": round(ms[int(0.99 * (len(ms) - 1))], 2),
        "failures": failures,
        # CPU per request, whole machine's share of it: the server's processes (tritonserver, its stubs, the
        # edge and its gRPC front) and this client. Unlike throughput, other work on the machine barely
        # moves it; at saturation on dedicated cores, throughput is inversely proportional to it.
        "server_cpu_us_per_request": round(1e6 * server_cpu / max(len(ms), 1)),
        "client_cpu_us_per_request": round(1e6 * client_cpu / max(len(ms), 1)),
        "cpu_us_per_request": round(1e6 * (server_cpu + client_cpu) / max(len(ms), 1)),
    }


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(roots: list[int]) -> float:
    """User + system CPU time of `roots` and every process below them (from /proc)."""
    parents, ticks = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        ticks[int(entry.name)] = int(fields[11]) + int(fields[12])
    wanted, grown = set(roots), True
    while grown:
        below = {pid for pid, parent in parents.items() if parent in wanted} - wanted
        wanted |= below
        grown = bool(below)
    return sum(ticks.get(pid, 0) for pid in wanted) / CLOCK_TICKS


def machine() -> str:
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "?")
    return f"{platform.machine()} {model}, {len(os.sched_getaffinity(0))} cores"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="per round and target")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--kinds",
        default="",
        help="only the request kinds whose name holds this (e.g. JSON); no record written",
    )
    parser.add_argument(
        "--python-grpc-front",
        action="store_true",
        help="also the edge with its Python gRPC front (gRPC rows)",
    )
    return parser.parse_args()


def start_servers(stack: contextlib.ExitStack, python_front: bool) -> dict[str, TritonServer]:
    servers = {
        "edge on": stack.enter_context(TritonServer(variant="cpu", ports=Ports.free(), exit_timeout_s=3)),
        "edge off": stack.enter_context(
            TritonServer(variant="cpu", ports=Ports.free(), exit_timeout_s=3, edge="off")
        ),
    }
    if python_front:
        os.environ[NATIVE_GRPC_ENV] = "off"  # read by the edge process this server starts
        servers[PYTHON_FRONT] = stack.enter_context(
            TritonServer(variant="cpu", ports=Ports.free(), exit_timeout_s=3)
        )
        del os.environ[NATIVE_GRPC_ENV]
    return servers


def measure(args, protocol: str, kind: str, spec, targets: dict[str, TritonServer]) -> dict:
    """One request kind against every target, in alternating rounds: its row of the record."""
    collected = {name: ([], 0) for name in targets}
    cpu = {name: [0.0, 0.0] for name in targets}  # server tree, this client (seconds)
    for round_index in range(args.rounds):
        for name, server in targets.items():
            print(f"{protocol} {kind}: round {round_index + 1}/{args.rounds}, {name} ...", flush=True)
            if protocol == "http":
                path, body, headers = spec
                run = hammer_http(
                    f"http://{server.http_url}", path, body, headers, args.seconds, args.concurrency
                )
            else:
                run = hammer_grpc(server.grpc_url, spec, args.seconds, args.concurrency)
            roots = [p.pid for p in (server.process, server.edge_process) if p is not None]
            server_before, client_before = tree_cpu_seconds(roots), sum(os.times()[:2])
            latencies, failures = asyncio.run(run)
            cpu[name][0] += tree_cpu_seconds(roots) - server_before
            cpu[name][1] += sum(os.times()[:2]) - client_before
            previous = collected[name]
            collected[name] = (previous[0] + latencies, previous[1] + failures)
    seconds = args.seconds * args.rounds
    row = {name: summarize(*collected[name], seconds, *cpu[name]) for name in targets}
    row["throughput_ratio"] = round(row["edge on"]["requests_per_s"] / row["edge off"]["requests_per_s"], 3)
    row["cpu_ratio"] = round(row["edge off"]["cpu_us_per_request"] / row["edge on"]["cpu_us_per_request"], 3)
    if PYTHON_FRONT in row:
        row["python_front_throughput_ratio"] = round(
            row[PYTHON_FRONT]["requests_per_s"] / row["edge off"]["requests_per_s"], 3
        )
        row["python_front_cpu_ratio"] = round(
            row["edge off"]["cpu_us_per_request"] / row[PYTHON_FRONT]["cpu_us_per_request"], 3
        )
    return row


def make_record(args, results: dict, grpc_front: str, load_before, replaced: dict | None) -> dict:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO_ROOT, check=False
    ).stdout.strip()
    record = {
        "what": "edge on vs off at saturation, CPU variant (tritonserver 2.51, Python backend)",
        "command": f"scripts/bench_edge.py --seconds {args.seconds:g} --rounds {args.rounds} "
        f"--concurrency {args.concurrency}",
        "commit": commit,
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
        "concurrency": args.concurrency,
        "seconds_per_target": args.seconds * args.rounds,
        "grpc_front": grpc_front,
        # Other work on the machine shares the cores: the rounds alternate the targets so that it falls on
        # each alike; the load average says how busy the machine was.
        "load_average_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "results": results,
    }
    if replaced is not None:
        record["previous"] = {
            "commit": replaced.get("commit"),
            "date": replaced.get("date"),
            "throughput_ratio": {k: v["throughput_ratio"] for k, v in replaced.get("results", {}).items()},
            "cpu_ratio": {
                k: v["cpu_ratio"] for k, v in replaced.get("results", {}).items() if "cpu_ratio" in v
            },
        }
    return record


def markdown(record: dict) -> list[str]:
    lines = [
        "# What the edge costs (CPU variant)",
        "",
        f"Measured by `{record['command']}` on {record['date']} (commit {record['commit']}): "
        f"{record['machine']}, {record['concurrency']} concurrent clients on the same machine, "
        f"{record['seconds_per_target']:.0f} s per target in alternating rounds. "
        "Edge on = `make serve` (the edge on the public ports, tritonserver on private sockets); "
        "edge off = the same server with `--edge off`. Load generator, edge and tritonserver share the "
        "cores, so the ratio is the edge's whole cost at saturation. "
        f"The edge's gRPC front: {record['grpc_front']}. The machine was shared with other work "
        f"(load average {record['load_average_before_after'][0]} before, "
        f"{record['load_average_before_after'][1]} after): "
        "the rounds alternate the targets so that it falls on each alike.",
        "",
        "CPU µs/request: the server's processes (tritonserver, its Python stubs, the edge) plus this client, "
        "per answered request; **CPU ratio** = edge off's / edge on's: the throughput ratio at saturation if "
        "the cores were this benchmark's alone and CPU per request stayed as measured.",
        "",
        "| request | target | req/s | p50 ms | p99 ms | failures | CPU µs/request (server + client) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for kind, by_target in record["results"].items():
        lines += markdown_rows(kind, by_target)
    if "previous" in record:
        before = record["previous"]
        lines += [
            "",
            f"The record this one replaced (commit {before['commit']}, {before['date']}), on / off: "
            + ", ".join(f"{kind} {ratio}" for kind, ratio in before["throughput_ratio"].items())
            + ".",
        ]
    return lines


def markdown_rows(kind: str, by_target: dict) -> list[str]:
    lines = []
    for name in ("edge on", "edge off", PYTHON_FRONT):
        if name not in by_target:
            continue
        row = by_target[name]
        cpu_cell = (
            f"{row['cpu_us_per_request']} ({row['server_cpu_us_per_request']} + "
            f"{row['client_cpu_us_per_request']})"
        )
        cells = [kind, name, row["requests_per_s"], row["p50_ms"], row["p99_ms"], row["failures"], cpu_cell]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    lines.append(
        f"| {kind} | **on / off: throughput, CPU ratio** | **{by_target['throughput_ratio']}** | | | | "
        f"**{by_target['cpu_ratio']}** |"
    )
    if "python_front_throughput_ratio" in by_target:
        lines.append(
            f"| {kind} | {PYTHON_FRONT} / off | {by_target['python_front_throughput_ratio']} | | | | "
            f"{by_target['python_front_cpu_ratio']} |"
        )
    return lines


def main() -> int:
    args = parse_args()
    record_path = OUT_DIR / "edge-overhead.json"
    replaced = json.loads(record_path.read_text()) if record_path.is_file() else None
    grpc_front = "compiled (edge/native)" if native_binary() is not None else "Python (grpcio)"
    results = {}
    load_before = os.getloadavg()
    with contextlib.ExitStack() as stack:
        servers = start_servers(stack, args.python_grpc_front)
        plan = [("http", kind, spec) for kind, spec in http_kinds().items()]
        plan += [("grpc", kind, payload) for kind, payload in grpc_kinds().items()]
        plan = [
            (protocol, kind, spec) for protocol, kind, spec in plan if args.kinds in f"{protocol}: {kind}"
        ]
        for protocol, kind, spec in plan:
            targets = {n: s for n, s in servers.items() if protocol == "grpc" or n != PYTHON_FRONT}
            results[f"{protocol}: {kind}"] = row = measure(args, protocol, kind, spec, targets)
            print(f"{protocol}: {kind}: {json.dumps(row)}", flush=True)
    if args.kinds:
        return 0  # a partial run: its rows are printed above, the record stays whole
    record = make_record(args, results, grpc_front, load_before, replaced)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    record_path.write_text(json.dumps(record, indent=2) + "\n")
    lines = markdown(record)
    (OUT_DIR / "edge-overhead.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
