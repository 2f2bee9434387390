"""The serving soak's parts without a server: how an answer is judged and counted, the sampler against a
closed port, the figures and the verdict from what was measured, and the record written with no network.
The soak against a real server: tests/server/test_soak.py."""

from __future__ import annotations

import json
import socket
import threading
import time

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from loadtests.record import Record, read_record
from loadtests.soak import page, report
from loadtests.soak.requests import MODELS, bad_requests, good_tasks
from loadtests.soak.workers import Mix, Sampler, Tally, Worker, good_failure, judge_bad, run_load
from trt_plugin_kit.interface import SAMPLES_DIR
from trt_plugin_kit.serving.host import free_port
from trt_plugin_kit.tritonserver.options import ServerLocation

DIGITS = str(SAMPLES_DIR)  # the 10 sample digits: no data set needed


@pytest.fixture(scope="module")
def bad():
    return bad_requests(DIGITS)


def test_a_bad_request_passes_only_when_refused_with_an_error_that_names_the_problem(bad):
    not_an_image = next(b for b in bad if b.label == "not an image")
    clear = judge_bad("http", not_an_image, InferenceServerException("expected a PNG or JPEG image"))
    assert clear.refused_clearly and not clear.accepted and clear.message == ""
    vague = judge_bad("grpc", not_an_image, InferenceServerException("internal error"))
    assert not vague.refused_clearly and not vague.accepted
    assert vague.message == "grpc not an image: refused without naming the problem: internal error"
    answered = judge_bad("http", not_an_image, None)
    assert (
        answered.accepted
        and not answered.refused_clearly
        and "accepted (must be refused)" in answered.message
    )
    broken = judge_bad("http", not_an_image, ConnectionRefusedError("refused"))
    assert (
        not broken.refused_clearly and broken.message == "http not an image: ConnectionRefusedError: refused"
    )


def test_the_tally_counts_per_protocol_and_keeps_the_first_failures(bad):
    tally = Tally()
    tasks = good_tasks(DIGITS)
    tally.add_good("http", "mnist", 0.002, "", at=1.0)
    tally.add_good("grpc", "mnist", 0.003, good_failure("grpc", tasks[0], TimeoutError("slow")), at=2.0)
    tally.add_bad("http", bad[0].label, judge_bad("http", bad[0], None), at=3.0)
    assert tally.totals() == {"good_ok": 1, "good_failed": 1, "bad_refused": 0, "bad_wrong": 1}
    assert tally.latencies == {"mnist": [0.002]}  # failed requests have no latency
    assert tally.failures[0].startswith("grpc MnistBatchTask(model='mnist', batch=1): TimeoutError: slow")
    for _ in range(100):
        tally.add_good("http", "l2norm", 0.0, "failed", at=4.0)
    assert len(tally.failures) == 50


def test_a_worker_against_a_closed_port_counts_every_request_as_failed(bad):
    """Real connections to a port nothing listens on: no exception ends the worker, each request is judged."""
    location = ServerLocation("127.0.0.1", free_port(), free_port())
    tally = Tally()
    mix = Mix({"http": 1, "grpc": 0}, good_tasks(DIGITS), bad, bad_share=0.5, timeout_s=1.0, seed=0)
    worker = Worker(0, location, mix, tally, lambda: 0.0)
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    worker.run(stop)
    totals = tally.totals()
    assert totals["good_ok"] == 0 and totals["bad_refused"] == 0
    assert totals["good_failed"] + totals["bad_wrong"] > 0
    assert all(message.startswith("http ") for message in tally.failures)


def test_a_paced_worker_sends_at_its_rate_and_no_faster(bad):
    """--rate: the same closed port (each request fails at once), 20 requests/s for 1 s: about 20 requests,
    where an unpaced worker sends hundreds."""
    location = ServerLocation("127.0.0.1", free_port(), free_port())

    def sent(rate: float | None) -> int:
        tally = Tally()
        mix = Mix({"http": 1, "grpc": 0}, good_tasks(DIGITS), bad, bad_share=0.5, timeout_s=1.0, seed=0)
        stop = threading.Event()
        threading.Timer(1.0, stop.set).start()
        Worker(0, location, mix, tally, lambda: 0.0, rate=rate).run(stop)
        return sum(tally.totals().values())

    assert 15 <= sent(20.0) <= 21
    assert sent(None) > 60


def test_the_sampler_records_what_it_could_not_read():
    tally = Tally()
    sampler = Sampler(lambda: None, f"http://127.0.0.1:{free_port()}/metrics", 0.1, tally, lambda: 1.234)
    sample = sampler.sample()
    assert sample["t"] == 1.23 and "metrics_error" in sample and "total_rss_mib" not in sample
    assert sample["good_ok"] == 0
    mib = 1024.0 * 1024.0
    sample = Sampler(
        lambda: (100 * mib, 300 * mib, 5), "http://127.0.0.1:9/metrics", 0.1, tally, lambda: 0
    ).sample()
    assert (sample["server_rss_mib"], sample["total_rss_mib"], sample["processes"]) == (100.0, 300.0, 5)


def test_run_load_stops_every_thread_and_returns_the_load_time():
    start = time.monotonic()

    def clock() -> float:
        return time.monotonic() - start

    sampler = Sampler(lambda: None, f"http://127.0.0.1:{free_port()}/metrics", 0.2, Tally(), clock)
    seconds = run_load([], sampler, 1.0, 5.0, clock)
    assert 1.0 <= seconds < 3.0
    assert len(sampler.samples) >= 2  # one at the start, then every 0.2 s
    assert threading.active_count() == 1 or all(t.name != "sampler" for t in threading.enumerate())


def measured(tally: Tally, samples: list[dict], alive: bool = True) -> report.Measured:
    return report.Measured(
        tally=tally,
        samples=samples,
        load_seconds=30.0,
        duration_s=31.0,
        server={"variant": "cpu", "triton_version": "2.51.0"},
        alive=alive,
        triton_counts={"mnist_pipeline": {"success": 3, "fail": 4}},
        ensembles=["mnist_pipeline"],
        memory_sampled=True,
    )


def config(**changes) -> dict:
    settings = {
        "workers": 2,
        "bad_share": 0.1,
        "sample_interval_s": 5.0,
        "warmup_s": 5.0,
        "max_drift_mib": 8.0,
    }
    return settings | {"seed": 0, "protocols": {"http": 1, "grpc": 1}} | changes


def memory_samples(start_mib: float, end_mib: float) -> list[dict]:
    return [
        {"t": float(t), "total_rss_mib": float(v), "server_rss_mib": float(v) / 2}
        for t, v in zip(range(0, 60, 5), np.linspace(start_mib, end_mib, 12), strict=True)
    ]


def test_the_figures_judge_failures_refusals_the_server_and_its_memory(bad):
    tally = Tally()
    for at in range(30):
        tally.add_good("http", "mnist_pipeline", 0.004, "", at=float(at))
    pipeline_bad = next(b for b in bad if b.model == "mnist_pipeline")
    tally.add_bad(
        "grpc", pipeline_bad.label, judge_bad("grpc", pipeline_bad, InferenceServerException("corrupt")), 5.0
    )
    tally.add_bad(
        "grpc", pipeline_bad.label, judge_bad("grpc", pipeline_bad, InferenceServerException("corrupt")), 6.0
    )

    figures = report.soak_figures("unit", config(), measured(tally, memory_samples(300, 301)), bad)
    assert figures["passed"] and figures["violations"] == []
    assert figures["totals"]["good_ok"] == 30 and figures["totals"]["bad_refused"] == 2
    rows = {(r["protocol"], r["request"]): r for r in figures["by_request"]}
    assert len(rows) == 2 * (len(MODELS) + len(bad))  # every model and bad kind, both protocols
    assert rows[("grpc", f"bad: {pipeline_bad.label}")]["ok"] == 2
    pipeline = figures["requests_by_model"]["mnist_pipeline"]
    assert pipeline["failed"] == pipeline["refused_on_purpose"] == 2 and pipeline["answered"] == 30
    assert pipeline["triton_failed_requests"] == 2  # Triton's 4 failures: an ensemble counts each twice
    assert figures["latency"]["mnist_pipeline"]["p50_ms"] == 4.0

    grown = report.soak_figures("unit", config(), measured(tally, memory_samples(300, 340), alive=False), bad)
    assert not grown["passed"]
    assert "the server exited during the soak" in grown["violations"]
    assert any(v.startswith("server memory drift ") for v in grown["violations"])
    unsampled = report.soak_figures("unit", config(), measured(tally, []), bad)
    assert (
        "too few memory samples after the warm-up to judge the drift (run longer)" in unsampled["violations"]
    )


def test_the_record_is_written_without_any_network(bad, tmp_path, monkeypatch):
    """The report gets what was measured: writing the record, its page and its chart opens no connection."""
    tally = Tally()
    for at in range(60):
        tally.add_good("grpc", "l2norm", 0.001 + at / 1e5, "", at=float(at))
    record = Record(
        "soak", "python -m loadtests.soak --duration 60s", "2026-11-25 19:00 UTC", {"commit": "abc"}
    )
    record.where["server"] = "running server at 127.0.0.1"
    record.figures = report.soak_figures(
        "unit", config(bad_share=0.0), measured(tally, memory_samples(300, 300.5)), bad
    )

    def no_network(*args, **kwargs):
        raise AssertionError("the soak's report opened a socket")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    json_path = page.write_results(record, tmp_path)
    monkeypatch.undo()
    assert read_record(json_path) == Record.from_dict(json.loads(json_path.read_text()))
    assert read_record(json_path).figures["totals"]["good_ok"] == 60
    text = (tmp_path / "unit.md").read_text()
    assert text.startswith("# Serving soak unit\n\nResult: **PASS**")
    assert "- commit: abc" in text and "- command: `python -m loadtests.soak --duration 60s`" in text
    assert "| mnist_pipeline |" in text and "(fail / 2: ensemble)" in text
    assert (tmp_path / "unit.png").stat().st_size > 10_000
    assert page.summary_lines(record, json_path)[0].startswith("soak: PASS — good ok 60, good failed 0")
