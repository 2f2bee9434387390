"""A served kit under load, scraped by a real Prometheus with deploy/monitoring/rules.yml loaded.

The one home of what tests/server/test_monitoring_prometheus.py and the dashboard's render
(``python -m trt_plugin_kit.deploy.dashboard``) both need: Debian's ``prometheus`` started on a private
directory, a CPU server started as ``make serve`` starts it (latency summaries on), and clients that send
every model requests, some of them failing.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import yaml

from trt_plugin_kit.deploy.kubernetes import RULES_FILE
from trt_plugin_kit.interface import (
    L2NORM,
    L2NORM_INPUT,
    MNIST,
    MNIST_INPUT,
    MNIST_PIPELINE,
    PIPELINE_INPUT,
    REPO_ROOT,
)
from trt_plugin_kit.serving.host import Ports, free_port
from trt_plugin_kit.serving.server import TritonServer

SCRAPE_JOB = "triton"  # the job name rules.yml's `up{job="triton"}` expects
SCRAPE_INTERVAL_S = 1
# A round of requests per client every 50 ms: the rules and panels need rates, not capacity (flat out, the two
# clients kept a core busy for the whole test file).
LOAD_PERIOD_S = 0.05
CLIENTS = 2


class MonitoringError(RuntimeError):
    pass


class Prometheus:
    """Debian's prometheus on a free loopback port, scraping `target` every second as job "triton"."""

    def __init__(self, workdir: Path, target: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": f"{SCRAPE_INTERVAL_S}s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES_FILE)],
            "scrape_configs": [{"job_name": SCRAPE_JOB, "static_configs": [{"targets": [target]}]}],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = workdir / "prometheus.log"
        self.process = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise MonitoringError("prometheus exited:\n" + self.log.read_text()[-3000:])
            try:
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=2).read()
                return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise MonitoringError("Prometheus not ready in 60 s:\n" + self.log.read_text()[-3000:])

    def api(self, path: str, **params) -> dict:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as response:
            body = json.loads(response.read())
        if body["status"] != "success":
            raise MonitoringError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        return self.api("query", query=expr)["result"]

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict]:
        return self.api("query_range", query=expr, start=start, end=end, step=step)["result"]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def send_load(server: TritonServer, stop: threading.Event, errors: list[str]) -> None:
    """Every model gets requests, a round every LOAD_PERIOD_S; every fifth pipeline request is not a picture
    (a BACKEND failure). Other errors end the client and are appended to `errors`."""
    import tritonclient.grpc as grpcclient  # noqa: PLC0415
    import tritonclient.http as httpclient  # noqa: PLC0415

    http = httpclient.InferenceServerClient(server.http_url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    digits = np.zeros((8, 1, 28, 28), np.float32)
    image = httpclient.InferInput(MNIST_INPUT, list(digits.shape), "FP32")
    image.set_data_from_numpy(digits)
    vectors = np.ones((4, 128), np.float32)
    vector = grpcclient.InferInput(L2NORM_INPUT, list(vectors.shape), "FP32")
    vector.set_data_from_numpy(vectors)
    png = (REPO_ROOT / "samples" / "digits" / "3.png").read_bytes()
    count = 0
    while not stop.wait(LOAD_PERIOD_S if count else 0):
        count += 1
        try:
            http.infer(MNIST, [image])
            grpc.infer(L2NORM, [vector])
            picture = png if count % 5 else b"not a picture"
            data = np.array([[picture]], dtype=np.object_)
            tensor = grpcclient.InferInput(PIPELINE_INPUT, list(data.shape), "BYTES")
            tensor.set_data_from_numpy(data)
            try:
                grpc.infer(MNIST_PIPELINE, [tensor])
            except Exception as error:  # noqa: BLE001 - the failure we want; anything else is recorded
                if picture == png:
                    errors.append(f"pipeline: {error}")
        except Exception as error:  # noqa: BLE001 - reported by the caller, not lost in a thread
            errors.append(str(error))
            return
    http.close()
    grpc.close()


def start_server(ports: Ports, log_file: Path) -> TritonServer:
    """The CPU variant as `make serve` starts it, on `ports`, ready."""
    server = TritonServer(
        variant="cpu",
        ports=ports,
        host="127.0.0.1",
        log_file=log_file,
        exit_timeout_s=3,
        admin_key=secrets.token_hex(32),
    )
    try:
        server.start()
        server.wait_until_ready(180)
    except Exception:
        server.stop()
        raise
    return server


class Scraped:
    """A server under load, the Prometheus scraping it, and the load's switch."""

    def __init__(self, workdir: Path, ports: Ports | None = None) -> None:
        self.workdir = workdir
        for attempt in range(3):  # a port picked as free can be taken before Triton binds it
            try:
                chosen = ports or Ports.free("127.0.0.1")
                self.server = start_server(chosen, workdir / f"tritonserver-{attempt}.log")
                break
            except Exception as error:
                if ports or attempt == 2 or "address already in use" not in str(error).lower():
                    raise
        try:
            self.prometheus = Prometheus(workdir, urllib.parse.urlsplit(self.server.metrics_url).netloc)
        except Exception:
            self.server.stop()
            raise
        self.stop_event, self.errors = threading.Event(), []
        self.clients: list[threading.Thread] = []
        self.start_load()

    def __iter__(self):
        return iter((self.server, self.prometheus))

    def start_load(self) -> None:
        self.stop_event = threading.Event()
        self.clients = [
            threading.Thread(target=send_load, args=(self.server, self.stop_event, self.errors))
            for _ in range(CLIENTS)
        ]
        for client in self.clients:
            client.start()

    def stop_load(self) -> None:
        self.stop_event.set()
        for client in self.clients:
            client.join(30)
        if self.errors:
            raise MonitoringError(f"the load's clients failed: {self.errors[:5]}")

    def restart_server(self, down_s: float = 0.0, log_name: str = "tritonserver-restarted.log") -> None:
        """Stops the server and, `down_s` later, starts a new one on the same ports, as make serve's
        supervisor (or a kubelet) would after a crash; the load must be stopped first."""
        self.server.stop()
        time.sleep(down_s)
        self.server = start_server(self.server.ports, self.workdir / log_name)

    def close(self) -> None:
        self.stop_event.set()
        for client in self.clients:
            client.join(30)
        self.prometheus.stop()
        self.server.stop()
