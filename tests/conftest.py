"""Shared pytest fixtures, and the markers that say what a test needs.

Tests live by what they need: tests/unit (Python only, seconds), tests/library (the plugin library built by
`make plugins`, TensorRT-RTX), tests/server (a real tritonserver: the fixture below, or one they start). Each
test gets the marker of its folder, so `pytest -m unit`, `-m "not server"` etc. pick a part; `make test`
runs them all. GPU-only checks are not pytest tests: they run on the GPU machine through scripts/gpu_*.sh.

`triton_server` (session scope): a real tritonserver on this repository's models, started the way
`make serve` starts its CPU variant (PyTriton's tritonserver binary, Python backend, --model-config-name=cpu)
on free ports of 127.0.0.1. The object it yields has

    http_url     "127.0.0.1:PORT"                   (tritonclient.http.InferenceServerClient(url=...))
    grpc_url     "127.0.0.1:PORT"                   (tritonclient.grpc.InferenceServerClient(url=...))
    metrics_url  "http://127.0.0.1:PORT/metrics"    (Prometheus text format)
    log_file     path of the server's log (handy in assertion messages)

and is a trt_plugin_kit.serving.server.TritonServer (`is_running()`, `log_tail()`, `admin_key`: a random key
the
tests know, as an operator who set TRITON_ADMIN_KEY would). The server stops at the end of
the session, also when tests fail. Set TRITON_TEST_MODEL_REPOSITORY to serve another model repository.

`--blas-threads N` (or TEST_BLAS_THREADS=N): the whole run with N BLAS threads (threadpoolctl), instead of the
BLAS's own choice (one per core). `make numeric-threads` reruns the tests marked `numeric` (assertions on
floats that went through BLAS, ONNX Runtime, Pillow's resampling or training) with one thread, so that a test
which holds only for one order of the BLAS's sums fails in `make test`. The header of the run names the BLAS,
its kernels and its thread count.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import numpy  # noqa: F401 - loads numpy's BLAS, which --blas-threads limits (threadpoolctl sees loaded ones)
import pytest

from trt_plugin_kit.interface import MODEL_REPOSITORY
from trt_plugin_kit.serving.host import Ports, ServingError
from trt_plugin_kit.serving.server import TritonServer

SERVER_START_ATTEMPTS = 3  # a port picked as free and taken before Triton binds it, or a start Triton aborted
SERVER_READY_TIMEOUT_S = 180.0
BLAS_THREADS_ENV = "TEST_BLAS_THREADS"
BLAS_LIMITS = pytest.StashKey[object]()


def pytest_addoption(parser):
    parser.addoption(
        "--blas-threads",
        type=int,
        default=None,
        metavar="N",
        help=f"run with N BLAS threads (threadpoolctl); default ${BLAS_THREADS_ENV}, else the BLAS's own",
    )


def _blas_threads(config) -> int | None:
    threads = config.getoption("--blas-threads")
    if threads is None and os.environ.get(BLAS_THREADS_ENV, "").strip():
        try:
            threads = int(os.environ[BLAS_THREADS_ENV])
        except ValueError:
            raise pytest.UsageError(
                f"{BLAS_THREADS_ENV}={os.environ[BLAS_THREADS_ENV]!r} is not a number"
            ) from None
    if threads is not None and threads < 1:
        raise pytest.UsageError(f"--blas-threads / {BLAS_THREADS_ENV} must be >= 1, got {threads}")
    return threads


def _blas_libraries() -> list[dict]:
    """threadpoolctl's view of the BLAS libraries loaded in this process (numpy's, imported above)."""
    from threadpoolctl import threadpool_info

    return [info for info in threadpool_info() if info["user_api"] == "blas"]


def pytest_configure(config):
    threads = _blas_threads(config)
    if threads is None:
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        raise pytest.UsageError(
            "--blas-threads needs threadpoolctl (pip install -e '.[dev]', or make test-venv)"
        ) from None
    if not _blas_libraries():
        raise pytest.UsageError("--blas-threads: threadpoolctl finds no BLAS library in this process")
    config.stash[BLAS_LIMITS] = threadpool_limits(limits=threads, user_api="blas")


def pytest_unconfigure(config):
    limits = config.stash.get(BLAS_LIMITS, None)
    if limits is not None:
        limits.restore_original_limits()


def _blas_line(config) -> str:
    try:
        libraries = _blas_libraries()
    except ImportError:
        return "BLAS: threadpoolctl is not installed, cannot tell"
    described = ", ".join(
        f"{info['internal_api']} {info['version']} ({info.get('architecture') or 'kernels unknown'}), "
        f"{info['num_threads']} thread(s)"
        for info in libraries
    )
    limited = " (limited by --blas-threads)" if BLAS_LIMITS in config.stash else ""
    return f"BLAS: {described or 'none found'}{limited}"


@pytest.fixture(scope="session")
def triton_server(tmp_path_factory):
    model_repository = Path(os.environ.get("TRITON_TEST_MODEL_REPOSITORY", MODEL_REPOSITORY))
    log_dir = tmp_path_factory.mktemp("tritonserver")
    errors = []
    for attempt in range(1, SERVER_START_ATTEMPTS + 1):
        server = TritonServer(
            variant="cpu",
            ports=Ports.free("127.0.0.1"),
            host="127.0.0.1",
            model_repository=model_repository,
            log_file=log_dir / f"tritonserver-{attempt}.log",
            exit_timeout_s=3,  # do not wait long for test clients' idle keep-alive connections
            # The tests play the operator who configured a key (TRITON_ADMIN_KEY); without one the admin
            # APIs are closed to everybody (test_serving_hardening.py checks that on its own server).
            # Hex: a urlsafe key may start with "-", which the clients' --admin-key would read as an option.
            admin_key=os.environ.get("TRITON_ADMIN_KEY") or secrets.token_hex(32),
        )
        try:
            server.start()
            server.wait_until_ready(SERVER_READY_TIMEOUT_S)
        except ServingError as error:
            # Triton 2.51 can abort while its models load on a busy machine (a Boost.Interprocess
            # lock_exception in the Python backend): such a start is tried again, as `make serve` does.
            crashed = server.killed_by_signal()
            server.stop()
            errors.append(f"attempt {attempt}: {error}")
            if "address already in use" not in str(error).lower() and not crashed:
                break
            continue
        try:
            yield server
        finally:
            server.stop()
        return
    pytest.fail("could not start tritonserver for the tests:\n" + "\n".join(errors), pytrace=False)


MARKED_FOLDERS = ("unit", "library", "server")
# The files that take longest, collected first: make test's workers (pytest-xdist, --dist loadfile
# --no-loadscope-reorder) take files in collection order, and these, in alphabetical order (or, in xdist's
# own order, for having few tests), used to start when the other workers had nothing left to do. Their wall
# time in a pytest-only run on the 2-core machine (2026-11-26; test_perf.py with its Debian 13 root made,
# which a fresh machine makes first).
LONGEST_FIRST = (
    "tests/server/test_perf.py",  # 38 s (a fresh machine: 110 s)
    "tests/server/test_edge_budgets.py",  # 126 s (2026-11-28: both gRPC fronts, servers of its own, floods)
    "tests/server/test_serving_hardening.py",  # 99 s (a killing request resent for a minute)
    "tests/server/test_soak.py",  # 65 s (a one-minute soak)
    "tests/library/test_scaffold.py",  # 59 s (the tutorial: build, serve, load test)
    "tests/server/test_edge_attacks.py",  # 52 s (the slow-client stalls, two 8 s crowds of abandoned calls)
    "tests/server/test_serving_launcher.py",  # 51 s
    "tests/server/test_loadtest_smoke.py",  # 51 s
    "tests/server/test_monitoring_prometheus.py",  # 39 s
    "tests/server/test_clients_server.py",  # 38 s
    "tests/server/test_readme_fresh_clone.py",  # 24 s
    "tests/unit/test_onnx_eval.py",  # 23 s
    "tests/library/test_tensorrt_rtx.py",  # 21 s
    "tests/unit/test_clients_unit.py",  # 18 s
    "tests/server/test_plugin_onnx_stand_in.py",  # 15 s
)


def _schedule_rank(item) -> int:
    path = Path(str(item.fspath)).relative_to(Path(__file__).parent.parent).as_posix()
    return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(config, items):
    for item in items:
        folder = Path(str(item.fspath)).parent.name
        if folder in MARKED_FOLDERS:
            item.add_marker(getattr(pytest.mark, folder))
    items.sort(key=_schedule_rank)  # stable: within a file, and among the rest, the order stays


def pytest_report_header(config):
    return _blas_line(config)


def pytest_terminal_summary(terminalreporter, config):
    if BLAS_LIMITS in config.stash:  # -q hides the header: say it at the end, where make's log shows it
        terminalreporter.write_line(_blas_line(config))
