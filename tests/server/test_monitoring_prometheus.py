"""The dashboard and the rules of deploy/monitoring/ against a real Prometheus scraping a real server.

A CPU server started as `make serve` starts it (which turns Triton's latency summaries on: the dashboard's
percentile panels need them), is scraped every second through the
edge's /metrics by the host's Prometheus (Debian package `prometheus`) with rules.yml loaded, while clients
send requests of every model, some of them failing. Then every dashboard query, every recording rule and
every alert's query (its expression without the threshold) must return data, Prometheus must have evaluated
every rule without error, and the metric names the docs, the autoscaler and the dashboard use must be ones
this tritonserver exports. Last, the server is stopped and started again on its ports: TritonDown's and
TritonServerRestarted's expressions must see it.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import yaml

from trt_plugin_kit.interface import (
    L2NORM,
    L2NORM_INPUT,
    MNIST,
    MNIST_INPUT,
    MNIST_PIPELINE,
    MODEL_NAMES,
    PIPELINE_INPUT,
    REPO_ROOT,
)
from trt_plugin_kit.serving.host import Ports, free_port
from trt_plugin_kit.serving.server import TritonServer

MONITORING = REPO_ROOT / "deploy" / "monitoring"
RULES = MONITORING / "rules.yml"
DASHBOARD = MONITORING / "triton-dashboard.json"
SCRAPE_JOB = "triton"  # the job name rules.yml's `up{job="triton"}` expects
LOAD_S = 25  # long enough for [1m] rates to have many samples at a 1 s scrape interval
# A round of requests per client every 50 ms: the rules and panels need rates, not capacity (flat out, the two
# clients kept a core busy for the whole file).
LOAD_PERIOD_S = 0.05
# GPU metrics of Triton 2.51 (docs/user_guide/metrics.md, "GPU Metrics"); the CPU server exports none.
GPU_METRICS = {
    "nv_gpu_utilization",
    "nv_gpu_memory_total_bytes",
    "nv_gpu_memory_used_bytes",
    "nv_gpu_power_usage",
    "nv_gpu_power_limit",
    "nv_energy_consumption",
}
# Files whose nv_* names must be metrics this tritonserver exports (or a GPU metric above): the docs, the
# deployments, the dashboard and rules, and the code that reads metrics (load tests, soak, failover).
DOCUMENTED_GLOBS = (
    "README.md",
    "docs/**/*.md",
    "deploy/**/*.md",
    "deploy/**/*.yaml",
    "deploy/**/*.yml",
    "deploy/**/*.json",
    "loadtests/**/*.md",
    "loadtests/**/*.py",
    "records/**/*.md",
    "trt_plugin_kit/**/*.py",
    "scripts/*.py",
)
COMPARISON = re.compile(r"^(?P<query>.+?)\s*(==|!=|>=|<=|>|<)\s*(?P<threshold>[-+0-9.e]+)\s*$", re.DOTALL)

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None,
    reason="no prometheus binary: apt-get install prometheus (Debian's package; bash .ci/run installs it)",
)


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every dashboard target, Grafana's variables as Grafana fills them for All."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$__rate_interval", "15s")
            queries.append((panel["title"], expr.replace("$model", ".+").replace("$instance", ".+")))
    return queries


def rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


class Prometheus:
    def __init__(self, workdir: Path, target: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
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
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            try:
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=2).read()
                return
            except OSError:
                time.sleep(0.5)
        raise AssertionError("Prometheus not ready in 60 s:\n" + self.log.read_text()[-3000:])

    def api(self, path: str, **params) -> dict:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        return self.api("query", query=expr)["result"]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def send_load(server: TritonServer, stop: threading.Event, errors: list[str]) -> None:
    """Every model gets requests, a round every LOAD_PERIOD_S; every fifth pipeline request is not a picture
    (a BACKEND failure)."""
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
        except Exception as error:  # noqa: BLE001 - reported by the test, not lost in a thread
            errors.append(str(error))
            return
    http.close()
    grpc.close()


def start_server(ports: Ports, log_file: Path) -> TritonServer:
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

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        for attempt in range(3):  # a port picked as free can be taken before Triton binds it
            try:
                self.server = start_server(Ports.free("127.0.0.1"), workdir / f"tritonserver-{attempt}.log")
                break
            except Exception as error:
                if attempt == 2 or "address already in use" not in str(error).lower():
                    raise
        self.prometheus = Prometheus(workdir, urllib.parse.urlsplit(self.server.metrics_url).netloc)
        self.stop_event, self.errors = threading.Event(), []
        self.clients = [
            threading.Thread(target=send_load, args=(self.server, self.stop_event, self.errors))
            for _ in range(2)
        ]
        for client in self.clients:
            client.start()

    def __iter__(self):
        return iter((self.server, self.prometheus))

    def stop_load(self) -> None:
        self.stop_event.set()
        for client in self.clients:
            client.join(30)
        assert not self.errors, self.errors[:5]

    def close(self) -> None:
        self.stop_event.set()
        for client in self.clients:
            client.join(30)
        self.prometheus.stop()
        self.server.stop()


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    """Scraped, after LOAD_S seconds of load, with the load still running (server, prometheus = scraped)."""
    state = Scraped(tmp_path_factory.mktemp("monitoring"))
    try:
        time.sleep(LOAD_S)
        assert not state.errors, state.errors[:5]
        yield state
        state.stop_load()
    finally:
        state.close()


def test_prometheus_scrapes_the_edge_s_metrics(scraped):
    _, prometheus = scraped
    targets = prometheus.api("targets")["activeTargets"]
    assert [(t["labels"]["job"], t["health"]) for t in targets] == [(SCRAPE_JOB, "up")], targets


def test_every_dashboard_query_returns_data(scraped):
    _, prometheus = scraped
    empty, gpu = [], []
    for title, expr in dashboard_queries():
        if set(re.findall(r"\bnv_gpu_\w+|\bnv_energy_\w+", expr)):
            gpu.append(title)
            assert prometheus.query(expr) == [], f"{title}: GPU data from a CPU server?"
            continue
        if not prometheus.query(expr):
            empty.append(f"{title}: {expr}")
    assert not empty, "queries without data:\n" + "\n".join(empty)
    # The GPU row only; its metric names are checked against Triton's list below.
    assert sorted(set(gpu)) == ["GPU memory used", "GPU power", "GPU utilization"]


def test_every_rule_is_evaluated_without_error_and_returns_data(scraped):
    _, prometheus = scraped
    time.sleep(2)  # at least one evaluation of the rules with the load's rates
    evaluated = {
        rule["name"]: rule
        for group in prometheus.api("rules")["groups"]
        for rule in group["rules"]  # recording rules and alerts alike
    }
    empty = []
    for rule in rules():
        name = rule.get("record") or rule["alert"]
        assert evaluated[name]["health"] == "ok", evaluated[name]
        if "record" in rule:
            query = rule["record"]
        else:
            match = COMPARISON.match(rule["expr"].strip())
            assert match, f"{name}: expression is not <query> <comparison> <threshold>"
            query = match["query"]
        if not prometheus.query(query):
            empty.append(f"{name}: {query}")
    assert not empty, "rules without data:\n" + "\n".join(empty)


def test_rules_read_what_the_server_did(scraped):
    _, prometheus = scraped

    def per_model(expr: str) -> dict[str, float]:
        return {r["metric"]["model"]: float(r["value"][1]) for r in prometheus.query(expr)}

    # Every model loaded; no alert fires on a healthy server but the failure ratio's, which the load's
    # broken pictures drive (above 5 % of mnist_preprocess's requests, and the pipeline's).
    assert per_model("model:nv_inference_ready") == dict.fromkeys(MODEL_NAMES, 1.0)
    failure = per_model("model:nv_inference_failure_ratio:rate5m")
    assert 0.1 < failure[MNIST_PIPELINE] < 0.35 and failure[MNIST] == failure[L2NORM] == 0, failure
    firing = {a["labels"]["alertname"] for a in prometheus.api("alerts")["alerts"]}
    assert firing <= {"TritonFailureRatioHigh"}, firing
    # Batch size = rows per execution: mnist gets batches of 8 (and the pipeline's single digits).
    batch = per_model("model:nv_inference_batch_size:rate1m")
    assert 1 <= batch[MNIST] and 4 <= batch[L2NORM], batch  # l2norm: only requests of 4
    assert batch[MNIST_PIPELINE] == 1  # an ensemble: one execution per request, its steps batch
    # Queue + compute per request fit in Triton's request duration per request (the same requests).
    queue = per_model("model:nv_inference_queue_us_per_request:rate1m")
    compute = per_model("model:nv_inference_compute_us_per_request:rate1m")
    duration = per_model(
        "sum without (version) (rate(nv_inference_request_duration_us[1m]))"
        " / sum without (version) (rate(nv_inference_request_success[1m]))"
    )
    for model in (MNIST, L2NORM):
        assert 0 <= queue[model] and 0 < compute[model], (queue, compute)
        assert queue[model] + compute[model] <= duration[model] * 1.05, (model, queue, compute, duration)


def test_the_autoscaler_query_is_the_recording_rule(scraped):
    # prometheus-adapter's metricsQuery as the adapter fills it for a pod, and rules.yml's per-server rule:
    # the same number at the same instant.
    _, prometheus = scraped
    adapter = yaml.safe_load((REPO_ROOT / "deploy/kubernetes/prometheus-adapter/values.yaml").read_text())
    (rule,) = adapter["rules"]["custom"]
    query = rule["metricsQuery"].replace("<<.LabelMatchers>>", f'job="{SCRAPE_JOB}"')
    query = query.replace("<<.GroupBy>>", "instance")
    (recorded,) = [
        r for r in rules() if r.get("record") == "instance:nv_inference_queue_us_per_request:rate1m"
    ]
    at = time.time()
    (by_adapter,) = prometheus.api("query", query=query, time=at)["result"]
    (by_rule,) = prometheus.api("query", query=recorded["expr"], time=at)["result"]
    assert float(by_adapter["value"][1]) == pytest.approx(float(by_rule["value"][1]), rel=1e-9)
    assert float(by_adapter["value"][1]) > 0


def test_documented_metric_names_are_exported(scraped):
    server, _ = scraped
    exported = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    families = set(re.findall(r"^# TYPE (nv_\w+) ", exported, flags=re.MULTILINE))
    # Summaries export _count and _sum series beside the quantiles.
    names = families | {f"{name}{suffix}" for name in families for suffix in ("_count", "_sum")}
    unknown = {}
    documented = sorted({path for pattern in DOCUMENTED_GLOBS for path in REPO_ROOT.glob(pattern)})
    assert len(documented) > 50 and MONITORING / "rules.yml" in documented
    for path in documented:
        # Whole names only ("nv_inference_compute_*_duration_us" stands for three), not the middle of a
        # recording rule's level:metric:operation name.
        used = set(re.findall(r"(?<![\w:])nv_[a-z_]*[a-z](?![\w*:])", path.read_text()))
        missing = used - names - GPU_METRICS
        if missing:
            unknown[str(path.relative_to(REPO_ROOT))] = sorted(missing)
    assert not unknown, f"metric names this tritonserver does not export: {unknown}"


def test_a_restarted_server_is_seen_down_and_restarted(scraped):
    # Last in this file: stops the load and replaces the server by a new one on the same ports, as the
    # supervisor of `make serve` (or a kubelet) would after a crash.
    server, prometheus = scraped
    scraped.stop_load()
    down = 'up{job="triton"} == 0'  # TritonDown's expression, threshold included
    server.stop()
    deadline = time.monotonic() + 20
    while not prometheus.query(down):
        assert time.monotonic() < deadline, "Prometheus never saw the stopped server down"
        time.sleep(0.5)
    scraped.server = start_server(server.ports, scraped.workdir / "tritonserver-restarted.log")
    import tritonclient.http as httpclient  # noqa: PLC0415

    client = httpclient.InferenceServerClient(scraped.server.http_url)
    digits = np.zeros((1, 1, 28, 28), np.float32)
    image = httpclient.InferInput(MNIST_INPUT, list(digits.shape), "FP32")
    image.set_data_from_numpy(digits)
    client.infer(MNIST, [image])  # the new server's counters: warmup + 1, below the old ones
    client.close()
    restarted = "instance:nv_inference_exec_count:resets15m > 0"  # TritonServerRestarted's expression
    deadline = time.monotonic() + 20
    while not prometheus.query(restarted):
        assert time.monotonic() < deadline, "Prometheus never saw the counters go back"
        time.sleep(0.5)
    assert not prometheus.query(down)
    ready = {r["metric"]["model"]: r["value"][1] for r in prometheus.query("model:nv_inference_ready")}
    assert ready == dict.fromkeys(MODEL_NAMES, "1")
