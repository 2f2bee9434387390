"""The server under soak, and what the soak reads from it: one the soak starts the way `make serve` does, or
one already running; its memory (the process tree's resident set), Triton's statistics API (per-model request
counts) and which models are ensembles. The soak's only reads of the server besides its requests and the
sampler's Prometheus counters (trt_plugin_kit.tritonserver.metrics)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from trt_plugin_kit.interface import MODEL_NAMES
from trt_plugin_kit.serving.host import Ports, choose_variant
from trt_plugin_kit.serving.server import TritonServer
from trt_plugin_kit.tritonserver.options import ServerLocation
from trt_plugin_kit.tritonserver.protocol import client_module, wait_until_ready

STARTED_SERVER_READY_S = 300.0  # a server the soak starts may load its models for a while


class SoakServer:
    """Where the server is (`location`), its PID for memory samples (or None), how the record describes it
    (`info`), and, for a server the soak started, the process to stop and its log."""

    def __init__(self, location: ServerLocation, pid: int | None, info: dict, process: TritonServer | None):
        self.location, self.pid, self.info, self.process = location, pid, info, process

    @classmethod
    def start(cls, variant_choice: str) -> SoakServer:
        """Starts Triton like `make serve`, on free loopback ports, its log in a folder of its own."""
        variant, reason = choose_variant(variant_choice)
        log_dir = Path(tempfile.mkdtemp(prefix="soak_triton_"))
        server = TritonServer(variant=variant, ports=Ports.free(), log_file=log_dir / "tritonserver.log")
        print(f"soak: starting the {variant} server ({reason}); log {server.log_file}", flush=True)
        server.start()
        location = server.location
        info = {"variant": variant, "description": f"{server.describe_variant()}, started by the soak"}
        return cls(location, server.process.pid, info, server)

    @classmethod
    def attach(cls, location: ServerLocation, pid: int | None) -> SoakServer:
        return cls(
            location,
            pid,
            {"variant": "external", "description": f"running server at {location.describe()}"},
            None,
        )

    def wait_ready(self, models: tuple[str, ...], timeout_s: float) -> None:
        """Waits for the server and `models`; notes Triton's version in `info`. Raises NotReady."""

        def exited() -> str | None:
            if self.process is None or self.process.is_running():
                return None
            return f"tritonserver exited before it was ready; last lines:\n{self.process.log_tail()}"

        timeout_s = STARTED_SERVER_READY_S if self.process else timeout_s
        metadata = wait_until_ready(self.location, models=models, timeout_s=timeout_s, stopped=exited)
        self.info["triton_version"] = metadata.get("version")

    def alive(self) -> bool:
        return self.process.is_running() if self.process is not None else True

    def rss(self) -> tuple[float, float, int] | None:
        return process_tree_rss(self.pid) if self.pid is not None else None

    def stop(self) -> str:
        """Stops a server the soak started; returns the end of its log when it had died on its own (for the
        record), and removes the log of one that lived."""
        if self.process is None:
            return ""
        died = not self.process.is_running()
        tail = self.process.log_tail(40) if died else ""
        self.process.stop()
        if not died:
            shutil.rmtree(self.process.log_file.parent, ignore_errors=True)
        return tail


def process_tree_rss(pid: int) -> tuple[float, float, int] | None:
    """(RSS of pid, RSS of pid and all its descendants, number of processes) in bytes, or None if gone."""
    try:
        import psutil  # noqa: PLC0415 - optional

        try:
            root = psutil.Process(pid)
            processes = [root, *root.children(recursive=True)]
            rss = []
            for process in processes:
                try:
                    rss.append(process.memory_info().rss)
                except psutil.NoSuchProcess:
                    rss.append(0)
            return float(rss[0]), float(sum(rss)), len(processes)
        except psutil.NoSuchProcess:
            return None
    except ImportError:
        pass

    def rss_of(p: int) -> float:
        with open(f"/proc/{p}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return float(line.split()[1]) * 1024.0
        return 0.0

    def children(p: int) -> list[int]:
        found = []
        for task in Path(f"/proc/{p}/task").glob("*"):
            text = (task / "children").read_text().split() if (task / "children").exists() else []
            found += [int(c) for c in text]
        return found

    try:
        tree, queue = [], [pid]
        while queue:
            current = queue.pop()
            tree.append(current)
            queue += children(current)
        sizes = [rss_of(p) for p in tree]
        return sizes[0], sum(sizes), len(tree)
    except OSError:
        return None


def triton_request_counts(location: ServerLocation) -> dict[str, dict[str, int]]:
    """{model: {"success", "fail"}} from Triton's statistics API (cumulative since the server started)."""
    client = client_module("http").InferenceServerClient(location.address("http"))
    try:
        statistics = client.get_inference_statistics()
    finally:
        client.close()
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"success": 0, "fail": 0})
    for entry in statistics.get("model_stats", []):
        stats = entry.get("inference_stats", {})
        counts[entry["name"]]["success"] += int(stats.get("success", {}).get("count", 0))
        counts[entry["name"]]["fail"] += int(stats.get("fail", {}).get("count", 0))
    return dict(counts)


def settled_request_counts(location: ServerLocation, settle_s: float = 0.5, limit_s: float = 10.0) -> dict:
    """Triton's per-model counts once they stop moving: Triton updates its statistics when it releases a
    request, which can come a moment after the client has its response, so a read right after the last
    answer can be a request or two short."""
    counts = triton_request_counts(location)
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(settle_s)
        again = triton_request_counts(location)
        if again == counts:
            break
        counts = again
    return counts


def ensemble_models(location: ServerLocation) -> list[str]:
    """The served models of this kit whose platform is "ensemble" (their failures count twice)."""
    client = client_module("http").InferenceServerClient(location.address("http"))
    try:
        return [name for name in MODEL_NAMES if client.get_model_config(name).get("platform") == "ensemble"]
    finally:
        client.close()
