"""CI size of the serving soak: `python -m loadtests.soak` for one minute against the real CPU
tritonserver of the `triton_server` fixture, over HTTP and gRPC, all models, a share of bad requests.

Every good request must succeed, every bad one must be refused with an error naming the problem, and the
JSON / Markdown / chart results must be written. Failures are counted per model as users count them, and
reconciled with Triton's statistics, which count an ensemble's failures twice. The
10-minute run is committed in records/soak/.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from trt_plugin_kit.interface import REPO_ROOT

SOAK = [sys.executable, "-m", "loadtests.soak"]
CI_DURATION = "60s"


def location_args(server) -> list[str]:
    return [
        "--host",
        "127.0.0.1",
        "--http-port",
        str(server.ports.http),
        "--grpc-port",
        str(server.ports.grpc),
        "--metrics-port",
        str(server.ports.metrics),
    ]


@pytest.mark.timeout(400)
def test_one_minute_soak_has_no_failed_good_request_and_refuses_every_bad_one(triton_server, tmp_path):
    command = [
        *SOAK,
        "--duration",
        CI_DURATION,
        "--workers",
        "4",
        # Paced: the checks below need hundreds of requests, not the cores the rest of the suite runs on.
        "--rate",
        "50",
        "--bad-share",
        "0.2",
        "--sample-interval",
        "3",
        "--warmup",
        "15s",
        *location_args(triton_server),
        "--server-pid",
        str(triton_server.process.pid),
        "--out",
        str(tmp_path),
        "--name",
        "ci",
    ]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    explanation = f"exit {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    assert result.returncode == 0, explanation

    record = json.loads((tmp_path / "ci.json").read_text())
    # The record of every load-test study: what was run, where, when, the figures.
    assert record["study"] == "soak" and record["command"].startswith("python -m loadtests.soak --duration")
    assert record["when"].endswith("UTC") and record["where"]["server"].startswith("running server at")
    report = record["figures"]
    totals = report["totals"]
    assert report["passed"] and not report["violations"], explanation
    assert totals["good_failed"] == 0 and totals["bad_wrong"] == 0
    assert totals["good_ok"] > 100 and totals["bad_refused"] > 10
    # Every model over both protocols, and every kind of bad request, actually happened.
    for row in report["by_request"]:
        assert row["ok"] > 0, f"nothing succeeded for {row}"
    assert report["memory"]["total_rss"] is not None  # the server's memory was sampled after the warm-up
    assert report["metrics_delta"]["nv_inference_request_success"]["l2norm"] > 0
    # Failures as users count them: one refused mnist_pipeline request is one failure, whatever Triton's
    # counters say (they count it twice: the ensemble and its mnist_preprocess step).
    pipeline_refused = sum(
        row["ok"]
        for row in report["by_request"]
        if row["request"] in ("bad: corrupt PNG", "bad: not an image")
    )
    counts = report["requests_by_model"]
    pipeline = counts["mnist_pipeline"]
    assert pipeline_refused > 0 and pipeline["failed"] == pipeline["refused_on_purpose"] == pipeline_refused
    assert pipeline["ensemble"] and pipeline["triton_fail"] == 2 * pipeline_refused  # Triton's double count
    assert pipeline["triton_failed_requests"] == pipeline_refused
    assert pipeline["triton_success"] == pipeline["answered"]
    # The Python-backend step answers the refusal with an error, which Triton counts as its success.
    assert counts["mnist_preprocess"]["triton_fail"] == 0
    assert counts["mnist_preprocess"]["triton_success"] == pipeline["answered"] + pipeline_refused
    # Requests refused before a model runs (shape, batch size) are in no Triton counter.
    assert counts["mnist"]["failed"] > 0 and counts["mnist"]["triton_fail"] == 0
    assert "| mnist_pipeline |" in (tmp_path / "ci.md").read_text()
    assert "(fail / 2: ensemble)" in (tmp_path / "ci.md").read_text()
    assert report["throughput"] and all(window["good_failed"] == 0 for window in report["throughput"])
    assert (tmp_path / "ci.md").read_text().startswith("# Serving soak ci")
    assert (tmp_path / "ci.png").stat().st_size > 10_000
    assert triton_server.is_running()


def test_soak_command_line_rejects_nonsense(tmp_path):
    for args, message in (
        (["--duration", "soon"], "bad duration"),
        (["--bad-share", "1.5"], "--bad-share must be in [0, 1)"),
        (["--grpc-port", "x"], "argument --grpc-port: expected a port number"),
        (["--mnist-images", "x"], "unrecognized arguments: --mnist-images"),  # one name: --mnist-dir
    ):
        result = subprocess.run(
            [*SOAK, *args, "--out", str(tmp_path)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 2 and message in result.stderr, result.stderr


def test_soak_reports_an_unreachable_server_as_unable_to_run(tmp_path):
    result = subprocess.run(
        [*SOAK, "--duration", "5s", "--http-port", "9", "--grpc-port", "9", "--metrics-port", "9"]
        + ["--wait-for-server", "1", "--out", str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "soak: cannot run: no ready Triton server at HTTP 127.0.0.1:9 / gRPC 127.0.0.1:9" in result.stderr


def test_a_refused_ensemble_request_counts_once_not_twice(triton_server):
    """Issue 18, item 10: Triton's statistics count a request refused inside mnist_pipeline twice (the
    ensemble and its step) and the step's refusal as its success; the soak's counts say 3 failures for 3."""
    import numpy as np

    from loadtests.soak import report, server
    from trt_plugin_kit.tritonserver.protocol import Connection

    location = triton_server.location
    png = (REPO_ROOT / "samples" / "digits" / "7.png").read_bytes()
    before = server.triton_request_counts(location)
    refused = answered = 0
    for protocol in ("http", "grpc", "http"):
        connection = Connection(protocol, location.address(protocol), 30)
        try:
            connection.infer("mnist_pipeline", {"image_bytes": np.array([[b"no image"]], dtype=object)})
        except Exception as error:  # noqa: BLE001 - the refusal is the point
            assert "PNG or JPEG" in str(error)
            refused += 1
        connection.infer(
            "mnist_pipeline", {"image_bytes": np.array([[png]], dtype=object)}, ["probabilities"]
        )
        answered += 1
        connection.close()
    delta = report.count_delta(before, server.triton_request_counts(location))
    assert delta["mnist_pipeline"] == {"success": answered, "fail": 2 * refused}  # Triton's double count
    assert delta["mnist_preprocess"] == {"success": answered + refused, "fail": 0}  # an error as a success
    by_request = [
        {"protocol": "http", "request": "mnist_pipeline", "ok": answered, "failed": 0},
        {"protocol": "http", "request": "bad: not an image", "ok": refused, "failed": 0, "accepted": 0},
    ]
    counts = report.requests_by_model(
        by_request, {"not an image": "mnist_pipeline"}, delta, server.ensemble_models(location)
    )["mnist_pipeline"]
    assert counts["failed"] == counts["triton_failed_requests"] == refused == 3
    assert counts["answered"] == counts["triton_success"] == answered
