"""CI smoke run of the load test: `python -m loadtests` (what `make loadtest` runs) against the real CPU
tritonserver of the `triton_server` fixture, over both protocols, plus runs that must fail: requests the
server rejects, a p99 bound, and no server at all. About a minute in all on 2 cores.

The failing runs go first: the clean run after them also shows that the server kept serving.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tritonclient.http

from loadtests import report
from trt_plugin_kit.interface import REPO_ROOT
from trt_plugin_kit.serving.host import free_port

SMOKE_SECONDS = 20
SMOKE_RUN_TIME = f"{SMOKE_SECONDS}s"
# The smoke run checks the run's path (every request type answered, reports, the live view), not what the
# server sustains: its users are paced (--user-rate) and leave the cores to the rest of make test. The p99
# test keeps Locust's default, users sending as fast as they are answered.
SMOKE_USER_RATE = "10"
# Every request type the default mix sends, over both protocols (default --batch-size 8, --l2norm-batch 4).
DEFAULT_REQUEST_TYPES = {
    f"{protocol} {model}"
    for protocol in ("http", "grpc")
    for model in ("mnist_pipeline b1", "mnist b8", "l2norm b4")
}


def run_loadtest(server, reports_dir: Path, *args: str) -> subprocess.CompletedProcess:
    http_host, http_port = server.http_url.rsplit(":", 1)
    _, grpc_port = server.grpc_url.rsplit(":", 1)
    # Only what the command line says: no stray LOADTEST_* / TRITON_* settings from the environment.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOADTEST_", "TRITON_", "LOCUST_"))}
    command = [
        sys.executable,
        "-m",
        "loadtests",
        "--host",
        http_host,
        "--http-port",
        http_port,
        "--grpc-port",
        grpc_port,
        "--reports-dir",
        str(reports_dir),
        *args,
    ]
    return subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def explain(result: subprocess.CompletedProcess) -> str:
    return f"exit {result.returncode}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"


@pytest.mark.timeout(180)
def test_failed_requests_break_the_default_threshold(triton_server, tmp_path):
    client = tritonclient.http.InferenceServerClient(triton_server.http_url)
    try:
        too_big = client.get_model_config("mnist")["max_batch_size"] + 1
    finally:
        client.close()
    result = run_loadtest(
        triton_server,
        tmp_path,
        *("--mix", "mnist", "--batch-size", str(too_big), "--users", "2", "--run-time", "4s"),
        *("--user-rate", "10"),
    )
    assert result.returncode == 1, explain(result)
    summary = report.load_summary(tmp_path / "summary.json")
    assert not summary.passed
    assert summary.total.requests > 0 and summary.total.failures == summary.total.requests
    assert any("failure ratio 1.0000" in violation for violation in summary.violations)
    # The server's reason reaches the report, per protocol.
    assert {error["name"] for error in summary.errors} == {f"http mnist b{too_big}", f"grpc mnist b{too_big}"}
    assert all("batch" in error["error"].lower() for error in summary.errors), summary.errors
    assert "THRESHOLD BROKEN" in result.stdout


@pytest.mark.timeout(180)
def test_p99_bound_breaks_the_run(triton_server, tmp_path):
    result = run_loadtest(
        triton_server,
        tmp_path,
        *("--mix", "l2norm", "--users", "2", "--run-time", "4s", "--max-p99-ms", "0.001"),
    )
    assert result.returncode == 1, explain(result)
    summary = report.load_summary(tmp_path / "summary.json")
    assert summary.total.failures == 0
    assert summary.violations and all(" p99 " in violation for violation in summary.violations)
    assert "FAILED" in (tmp_path / "summary.md").read_text().splitlines()[0]


@pytest.mark.timeout(180)
def test_paced_users_send_at_their_rate(triton_server, tmp_path):
    """--user-rate: 2 users at 5 requests/s for 4 s send about 40 requests (flat out: thousands)."""
    result = run_loadtest(
        triton_server, tmp_path, *("--mix", "l2norm", "--users", "2", "--run-time", "4s", "--user-rate", "5")
    )
    assert result.returncode == 0, explain(result)
    summary = report.load_summary(tmp_path / "summary.json")
    assert 20 <= summary.total.requests <= 2 * 5 * 4 + 4, summary.total
    assert summary.run["user_rate"] == 5.0
    # Issue 40, item 15: a mix without a digit model names no digits; the clock waits for Locust to start.
    assert summary.run["digits"] == "none (no digit model in the mix)"
    assert "0/4 s, starting Locust" in result.stderr, explain(result)


@pytest.mark.timeout(300)
def test_smoke_run_both_protocols_zero_failures(triton_server, tmp_path):
    result = run_loadtest(
        triton_server, tmp_path, "--users", "4", "--run-time", SMOKE_RUN_TIME, "--user-rate", SMOKE_USER_RATE
    )
    assert result.returncode == 0, explain(result)

    for name in ("locust_stats.csv", "locust_stats_history.csv", "locust_failures.csv", "locust.html"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert (tmp_path / "chart.png").read_bytes()[:4] == b"\x89PNG"

    summary = report.load_summary(tmp_path / "summary.json")
    assert summary.passed and summary.violations == []
    by_name = {stats.name: stats for stats in summary.request_types}
    assert set(by_name) == DEFAULT_REQUEST_TYPES
    for stats in by_name.values():
        assert stats.requests > 0 and stats.failures == 0, stats
        assert stats.requests_per_s > 0 and stats.p50_ms is not None and stats.p99_ms >= stats.p50_ms
        # Response length = bytes of the output tensors: 10 FP32 probabilities per digit, 128 FP32 per vector.
        per_item = 128 * 4 if stats.model == "l2norm" else 10 * 4
        assert stats.avg_response_bytes == stats.batch * per_item, stats
    assert summary.total.failures == 0 and summary.total.requests == sum(s.requests for s in by_name.values())
    assert summary.run["users"] == 4 and summary.run["http_url"] == triton_server.http_url
    assert summary.run["user_rate"] == float(SMOKE_USER_RATE)

    markdown = (tmp_path / "summary.md").read_text()
    assert markdown.startswith("# Load test PASSED")
    assert all(f"| {name} |" in markdown for name in DEFAULT_REQUEST_TYPES)
    assert "- thresholds: failure ratio at most 0, p99 not judged (no --max-p99-ms)" in markdown
    assert "not set ms" not in markdown
    # Locust's own tables: the type column is the protocol, the name does not repeat it.
    log = (tmp_path / "locust.log").read_text()
    assert re.search(r"^grpc\s+mnist_pipeline b1\s", log, re.M), log[-2000:]
    assert (
        "grpc mnist_pipeline b1" not in log and "mnist_pipeline b1" in (tmp_path / "locust.html").read_text()
    )

    # The live view agrees with the report: its last line shows the final figures, in seconds and requests.
    progress = result.stderr.replace("\r", "\n").splitlines()
    last = [line for line in progress if line.startswith("load test:")][-1]
    assert f"{SMOKE_SECONDS}/{SMOKE_SECONDS} s, {summary.total.requests:,} requests, 0 failed" in last, last
    assert "s/s" not in result.stderr and "requests=0" not in result.stderr
    # Counts show up from the first seconds on (they used to lag ~5 s behind, at "requests=0").
    early = [line for line in progress if re.match(r"load test:.*\| [1-5]/\d+ s, [1-9][\d,]* requests", line)]
    assert early, "\n".join(progress[:30])


@pytest.mark.timeout(120)
def test_connection_errors_count_as_failures(tmp_path):
    """Not only tritonclient's exceptions fail a request: a refused connection (socket error) does too."""
    port = str(free_port())  # nothing listens there
    final_stats = tmp_path / report.FINAL_STATS_FILE
    command = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(REPO_ROOT / "loadtests" / "locustfile.py"),
        *("--headless", "--only-summary", "--users", "2", "--spawn-rate", "2", "--run-time", "2s"),
        *("--host", "127.0.0.1", "--http-port", port, "--grpc-port", port),
        *("--timeout", "1", "--final-stats", str(final_stats)),
    ]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1, explain(result)  # Locust's own verdict: there were failures
    request_types, total, errors, _ = report.read_final_stats(final_stats)
    assert total.requests > 0 and total.failures == total.requests
    assert {stats.protocol for stats in request_types} == {"http", "grpc"}
    http_errors = [e["error"] for e in errors if e["name"].startswith("http ")]
    grpc_errors = [e["error"] for e in errors if e["name"].startswith("grpc ")]
    assert http_errors and all(error.startswith("ConnectionRefusedError") for error in http_errors)
    assert grpc_errors and all("UNAVAILABLE" in error for error in grpc_errors)


@pytest.mark.timeout(120)
def test_swapped_ports_are_named_at_once(triton_server, tmp_path):
    """The HTTP port given as gRPC's and the reverse: the reason, not 30 s of "waiting for Triton"."""
    http_port, grpc_port = triton_server.http_url.rsplit(":", 1)[1], triton_server.grpc_url.rsplit(":", 1)[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOADTEST_", "TRITON_", "LOCUST_"))}
    env |= {"TRITON_HTTP_PORT": grpc_port, "TRITON_GRPC_PORT": http_port}  # swapped, through the variables
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "loadtests", "--reports-dir", str(tmp_path)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, explain(result)
    assert f"127.0.0.1:{grpc_port} speaks gRPC, not HTTP. Are --http-port and --grpc-port swapped?" in (
        result.stderr
    )
    assert "Start one with `make serve`" not in result.stderr and time.monotonic() - started < 20
