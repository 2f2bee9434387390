"""CI size of the serving soak (issue 9): scripts/soak.py for one minute against the real CPU tritonserver
of the `triton_server` fixture, over HTTP and gRPC, all models, a share of bad requests.

Every good request must succeed, every bad one must be refused with an error naming the problem, and the
JSON / Markdown / chart results must be written. The 10-minute run is committed in docs/reliability/.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SOAK = REPO_ROOT / "scripts" / "soak.py"
CI_DURATION = "60s"


@pytest.mark.timeout(400)
def test_one_minute_soak_has_no_failed_good_request_and_refuses_every_bad_one(triton_server, tmp_path):
    command = [
        sys.executable,
        str(SOAK),
        "--duration",
        CI_DURATION,
        "--workers",
        "4",
        "--bad-share",
        "0.2",
        "--sample-interval",
        "3",
        "--warmup",
        "15s",
        "--http-url",
        triton_server.http_url,
        "--grpc-url",
        triton_server.grpc_url,
        "--metrics-url",
        triton_server.metrics_url,
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

    report = json.loads((tmp_path / "ci.json").read_text())
    totals = report["totals"]
    assert report["passed"] and not report["violations"], explanation
    assert totals["good_failed"] == 0 and totals["bad_wrong"] == 0
    assert totals["good_ok"] > 100 and totals["bad_refused"] > 10
    # Every model over both protocols, and every kind of bad request, actually happened.
    for row in report["by_request"]:
        assert row["ok"] > 0, f"nothing succeeded for {row}"
    assert report["memory"]["total_rss"] is not None  # the server's memory was sampled after the warm-up
    assert report["metrics_delta"]["nv_inference_request_success"]["l2norm"] > 0
    assert report["throughput"] and all(window["good_failed"] == 0 for window in report["throughput"])
    assert (tmp_path / "ci.md").read_text().startswith("# Serving soak ci")
    assert (tmp_path / "ci.png").stat().st_size > 10_000
    assert triton_server.is_running()


def test_soak_command_line_rejects_nonsense(tmp_path):
    for args, message in (
        (["--duration", "soon"], "bad duration"),
        (["--bad-share", "1.5"], "--bad-share must be in [0, 1)"),
        (["--http-url", "127.0.0.1:1"], "--http-url needs --grpc-url and --metrics-url too"),
    ):
        result = subprocess.run(
            [sys.executable, str(SOAK), *args, "--out", str(tmp_path)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 2 and message in result.stderr, result.stderr


def test_soak_reports_an_unreachable_server_as_unable_to_run(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            str(SOAK),
            "--duration",
            "5s",
            "--http-url",
            "127.0.0.1:9",
            "--grpc-url",
            "127.0.0.1:9",
            "--metrics-url",
            "http://127.0.0.1:9/metrics",
            "--out",
            str(tmp_path),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "soak: cannot run" in result.stderr
