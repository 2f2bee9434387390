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
import shutil
import time
import urllib.request

import numpy as np
import pytest
import yaml

from loadtests.response_cache import CACHE_METRICS
from trt_plugin_kit.deploy.dashboard import dashboard_targets, draw, fetch_panels, grafana_expr
from trt_plugin_kit.deploy.kubernetes import DASHBOARD_FILE as DASHBOARD
from trt_plugin_kit.deploy.kubernetes import MONITORING_DIR as MONITORING
from trt_plugin_kit.deploy.kubernetes import RULES_FILE as RULES
from trt_plugin_kit.deploy.monitoring import SCRAPE_JOB, Scraped, start_server
from trt_plugin_kit.interface import (
    L2NORM,
    MNIST,
    MNIST_INPUT,
    MNIST_PIPELINE,
    REPO_ROOT,
    repository_models,
)

LOAD_S = 25  # long enough for [1m] rates to have many samples at a 1 s scrape interval
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
    return [(panel["title"], grafana_expr(target["expr"], "15s")) for panel, target in dashboard_targets()]


def rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


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
    assert per_model("model:nv_inference_ready") == dict.fromkeys(repository_models(), 1.0)
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
        missing = used - names - GPU_METRICS - set(CACHE_METRICS)
        if missing:
            unknown[str(path.relative_to(REPO_ROOT))] = sorted(missing)
    assert not unknown, f"metric names this tritonserver does not export: {unknown}"


def test_the_dashboard_is_drawn_from_its_own_queries(scraped, tmp_path):
    # python -m trt_plugin_kit.deploy.dashboard's drawing over this file's load: every panel of the JSON is
    # on the sheet, every query but the GPU row's drew series, the GPU panels say "No data".
    _, prometheus = scraped
    dashboard = json.loads(DASHBOARD.read_text())
    end = time.time()
    fetched = fetch_panels(prometheus, dashboard, end - LOAD_S, end)
    drawn = draw(dashboard, fetched, tmp_path / "dashboard.png", "test")
    assert set(drawn) == {p["title"] for p in dashboard["panels"] if p["type"] != "row"}
    empty = sorted(title for title, count in drawn.items() if count == 0)
    assert empty == ["GPU memory used", "GPU power", "GPU utilization"], drawn
    # One line per series a query returns: the failure panel shows every model's 4 reasons.
    assert drawn["Failures"] == 4 * len(repository_models()) and drawn["Servers answering"] == 2, drawn
    # p50 and p99 of every model (a model whose configuration enables the response cache has none).
    assert drawn["Request latency p50 / p99"] == 2 * len(repository_models()), drawn
    assert (tmp_path / "dashboard.png").stat().st_size > 50_000


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
    assert ready == dict.fromkeys(repository_models(), "1")
