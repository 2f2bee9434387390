"""Load tests without a server: mixes, request names, payloads and response checks, Locust CSV parsing,
threshold verdicts, summaries, charts, and the command line's refusals. Fast; the runs against a real
Triton are in test_loadtest_smoke.py."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from loadtests import options, report, runner
from loadtests.outcomes import RequestFailure, ResponseCheckError, request_name
from loadtests.report import RequestTypeStats, Thresholds, find_violations
from loadtests.workloads import (
    PROTOCOLS,
    REQUEST_KINDS,
    L2NormTask,
    MnistBatchTask,
    MnistPipelineTask,
    WorkloadConfig,
    digit_images,
    parse_request_name,
)
from trt_plugin_kit.interface import REPO_ROOT, SAMPLES_DIR
from trt_plugin_kit.models import mnist
from trt_plugin_kit.serving.host import free_port
from trt_plugin_kit.tritonserver.options import ServerLocation, parse_weights

# What loadtests/locustfile.py writes at the end of a run (--final-stats): two request types.
FINAL_STATS = {
    "request_types": [
        {
            "type": "grpc",
            "name": "mnist b8",
            "requests": 1000,
            "failures": 0,
            "requests_per_s": 100.0,
            "avg_ms": 5.19,
            "max_ms": 14.1,
            "avg_response_bytes": 320.0,
            "p50_ms": 5,
            "p95_ms": 7,
            "p99_ms": 9,
        },
        {
            "type": "http",
            "name": "l2norm b4",
            "requests": 500,
            "failures": 5,
            "requests_per_s": 50.0,
            "avg_ms": 4.56,
            "max_ms": 19.2,
            "avg_response_bytes": 2048.0,
            "p50_ms": 4,
            "p95_ms": 6,
            "p99_ms": 10,
        },
    ],
    "total": {
        "type": "",
        "name": "Aggregated",
        "requests": 1500,
        "failures": 5,
        "requests_per_s": 150.0,
        "avg_ms": 4.98,
        "max_ms": 19.2,
        "avg_response_bytes": 895.0,
        "p50_ms": 5,
        "p95_ms": 7,
        "p99_ms": 10,
    },
    "errors": [
        {"name": "http l2norm b4", "error": "InferenceServerException: [400] bad input", "occurrences": 5}
    ],
    "exceptions": [],
}
# Locust's --csv-full-history file (the charts' data).
HISTORY_CSV = """\
Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%,\
Total Request Count,Total Failure Count,Total Median Response Time,Total Average Response Time,\
Total Min Response Time,Total Max Response Time,Total Average Content Size
100,0,,Aggregated,0.000000,0.000000,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,0,0,0,0.0,0,0,0
101,2,grpc,mnist b8,90.0,0.0,5,5,6,6,6,7,8,9,14,14,14,90,0,5,5.2,3.5,14.1,320.0
101,2,,Aggregated,90.0,0.0,5,5,6,6,6,7,8,9,14,14,14,90,0,5,5.2,3.5,14.1,320.0
102,2,grpc,mnist b8,110.0,0.0,5,5,6,6,6,7,8,12,14,14,14,200,0,5,5.2,3.5,14.1,320.0
102,2,,Aggregated,110.0,0.0,5,5,6,6,6,7,8,12,14,14,14,200,0,5,5.2,3.5,14.1,320.0
"""


def stats(name: str, requests: int = 100, failures: int = 0, p99: float | None = 10.0) -> RequestTypeStats:
    parsed = parse_request_name(name)
    return RequestTypeStats(
        name=name,
        protocol=parsed.protocol if parsed else None,
        model=parsed.model if parsed else None,
        batch=parsed.batch if parsed else None,
        requests=requests,
        failures=failures,
        requests_per_s=requests / 10,
        items_per_s=None,
        avg_ms=5.0 if requests else None,
        p50_ms=5.0 if requests else None,
        p95_ms=8.0 if requests else None,
        p99_ms=p99 if requests else None,
        max_ms=20.0 if requests else None,
        avg_response_bytes=40.0,
    )


def write_run(run_dir: Path, final_stats: dict = FINAL_STATS) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / report.FINAL_STATS_FILE).write_text(json.dumps(final_stats))
    (run_dir / "locust_stats_history.csv").write_text(HISTORY_CSV)
    return run_dir


# --------------------------------------------------------------------------------------------- mixes


def test_parse_weights_reads_weights_and_bare_names():
    assert parse_weights("http=3,grpc=1", PROTOCOLS, "protocol") == {"http": 3, "grpc": 1}
    assert parse_weights("grpc", PROTOCOLS, "protocol") == {"http": 0, "grpc": 1}
    assert parse_weights(" mnist = 2 , l2norm ", REQUEST_KINDS, "kind") == {
        "mnist_pipeline": 0,
        "mnist": 2,
        "l2norm": 1,
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ftp=1", "unknown protocol 'ftp'"),
        ("http=-1", "must be >= 0"),
        ("http=x", "whole number"),
        ("http=0,grpc=0", "no positive weight"),
        ("", "no positive weight"),
    ],
)
def test_parse_weights_rejects_bad_mixes(text, message):
    with pytest.raises(ValueError, match=message):
        parse_weights(text, PROTOCOLS, "protocol")


def test_request_names_round_trip_and_skip_foreign_names():
    assert request_name("grpc", "mnist_pipeline", 1) == "grpc mnist_pipeline b1"
    assert parse_request_name("http mnist b8") == parse_request_name(request_name("http", "mnist", 8))
    assert parse_request_name("http mnist b8").batch == 8
    for foreign in ("Aggregated", "ws mnist b8", "http mnist 8", "http mnist bx", "http mnist"):
        assert parse_request_name(foreign) is None


def test_workload_config_weights_tasks_and_lists_expected_names():
    config = WorkloadConfig(
        protocols={"http": 1, "grpc": 0}, mix={"mnist_pipeline": 2, "mnist": 0, "l2norm": 1}, l2norm_batch=3
    )
    tasks = config.build_tasks()
    assert [type(t).__name__ for t in tasks] == ["MnistPipelineTask", "MnistPipelineTask", "L2NormTask"]
    assert all(hasattr(t, "__name__") for t in tasks)  # Locust's HTML report names tasks by __name__
    assert config.request_names() == ["http mnist_pipeline b1", "http l2norm b3"]


def test_run_plan_passes_only_protocols_with_users_and_expects_names_only_when_each_gets_one(tmp_path):
    workload = WorkloadConfig(protocols={"http": 0, "grpc": 1}, mix=dict.fromkeys(REQUEST_KINDS, 1))
    plan = runner.RunPlan(
        location=ServerLocation("triton", 8000, 8001),
        workload=workload,
        users=1,
        spawn_rate=1,
        run_time="5s",
        timeout_s=10,
        out_dir=tmp_path,
        thresholds=Thresholds(),
        digits="10 sample digits from samples/digits",
    )
    # What the run used, as the caller described it: describing the plan loads no digits.
    assert plan.run_info("now")["digits"] == "10 sample digits from samples/digits"
    command = plan.locust_command()
    assert command[-1] == "GrpcTritonUser" and "HttpTritonUser" not in command
    assert command[command.index("--host") + 1] == "triton"
    assert command[command.index("--grpc-port") + 1] == "8001"
    assert len(plan.expected_request_names()) == 3
    plan.workload = WorkloadConfig(protocols={"http": 1, "grpc": 1}, mix=dict.fromkeys(REQUEST_KINDS, 1))
    assert plan.expected_request_names() == []  # 1 user, 2 protocols: one protocol gets no user
    plan.users = 2
    assert len(plan.expected_request_names()) == 6
    plan.workload = WorkloadConfig(protocols={"http": 10, "grpc": 1}, mix={"mnist": 1})
    assert plan.expected_request_names() == ["http mnist b8"]  # Locust gives both users to http


# ----------------------------------------------------------------------------------- payloads/checks


def test_pipeline_payloads_are_real_digits_as_png():
    task = MnistPipelineTask()
    inputs = task.make_inputs()
    payload = inputs["image_bytes"]
    assert payload.shape == (1, 1) and payload.dtype == np.object_
    decoded = np.asarray(Image.open(io.BytesIO(payload[0, 0])))
    assert decoded.shape == (28, 28)
    # Every pooled PNG decodes to exactly one of the real digits it came from.
    assert any(np.array_equal(decoded, digit) for digit in digit_images())


def test_mnist_batches_use_the_model_preprocessing():
    task = MnistBatchTask(batch=5)
    image = task.make_inputs()["image"]
    assert image.shape == (5, 1, 28, 28) and image.dtype == np.float32
    assert 0.0 <= image.min() and image.max() <= 1.0
    # Rows are consecutive pooled digits divided by 255 (trt_plugin_kit.models.mnist.to_tensor).
    digits = digit_images()
    start = next(i for i in range(len(digits)) if np.array_equal(mnist.to_tensor(digits[i]), image[0]))
    np.testing.assert_array_equal(image, mnist.to_tensor(digits[start : start + 5]))


def test_probability_check_accepts_distributions_and_rejects_the_rest():
    task = MnistBatchTask(batch=2)
    inputs = task.make_inputs()
    good = np.full((2, 10), 0.1, dtype=np.float32)
    task.check(inputs, {"probabilities": good})
    bad_cases = {
        "shape": {"probabilities": good[:1]},
        "missing": {},
        "NaN": {"probabilities": np.where(np.eye(2, 10, dtype=bool), np.nan, good).astype(np.float32)},
        "distribution": {"probabilities": good * 2},
    }
    for case, outputs in bad_cases.items():
        with pytest.raises(ResponseCheckError):
            task.check(inputs, outputs)
            pytest.fail(f"{case} passed the check")


def test_l2norm_check_compares_with_the_reference():
    task = L2NormTask(dim=16, batch=3)
    inputs = task.make_inputs()
    vectors = inputs["vector"]
    assert vectors.shape == (3, 16) and vectors.dtype == np.float32
    normalized = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    task.check(inputs, {"normalized": normalized})
    with pytest.raises(ResponseCheckError, match="differ"):
        task.check(inputs, {"normalized": vectors})
    with pytest.raises(ResponseCheckError, match="shape"):
        task.check(inputs, {"normalized": normalized[:, :8]})


def test_tasks_refuse_bad_sizes():
    with pytest.raises(ValueError, match="batch size"):
        MnistBatchTask(batch=0)
    with pytest.raises(ValueError, match="vector length"):
        L2NormTask(dim=0)


def test_request_failure_reports_type_and_message():
    failure = RequestFailure.wrap(ConnectionResetError("peer went away"))
    assert repr(failure) == "ConnectionResetError: peer went away"
    assert isinstance(failure.__cause__, ConnectionResetError)


# ------------------------------------------------------------------------------------ thresholds


def test_clean_run_passes_default_thresholds():
    rows = [stats("http mnist b8"), stats("grpc mnist b8")]
    assert find_violations(rows, stats("Aggregated", 200), Thresholds(), ["http mnist b8"]) == []


def test_a_single_failure_breaks_the_default_threshold():
    rows = [stats("http mnist b8", failures=1), stats("grpc mnist b8")]
    violations = find_violations(rows, stats("Aggregated", 200, failures=1), Thresholds())
    assert violations == [
        "http mnist b8: failure ratio 0.0100 (1/100) above 0",
        "Aggregated: failure ratio 0.0050 (1/200) above 0",
    ]


def test_failure_ratio_bound_is_per_request_type_and_overall():
    rows = [
        stats("http mnist b8", requests=1000, failures=5),
        stats("grpc mnist b8", requests=10, failures=1),
    ]
    total = stats("Aggregated", requests=1010, failures=6)
    violations = find_violations(rows, total, Thresholds(max_failure_ratio=0.01))
    # 0.5% and 0.6% overall pass; 10% on the small request type does not hide in the total.
    assert violations == ["grpc mnist b8: failure ratio 0.1000 (1/10) above 0.01"]


def test_p99_is_judged_only_when_a_bound_is_set():
    rows = [stats("http mnist b8", p99=250.0), stats("http l2norm b4", p99=40.0)]
    total = stats("Aggregated", 200, p99=250.0)
    assert find_violations(rows, total, Thresholds()) == []
    violations = find_violations(rows, total, Thresholds(max_p99_ms=100))
    assert violations == ["http mnist b8: p99 250 ms above 100 ms"]


def test_no_requests_missing_types_and_load_test_exceptions_fail():
    total = stats("Aggregated", requests=0)
    violations = find_violations([], total, Thresholds(), ["grpc l2norm b4"], [{"count": 3, "message": "x"}])
    assert violations == [
        "no request completed: the load test measured nothing",
        "grpc l2norm b4: no request of this type ran",
        "the load test itself raised 3 exception(s): see locust.log",
    ]


@pytest.mark.parametrize(("ratio", "p99"), [(-0.1, None), (1.5, None), (0.0, 0.0), (0.0, -5.0)])
def test_thresholds_refuse_nonsense(ratio, p99):
    with pytest.raises(ValueError):
        Thresholds(max_failure_ratio=ratio, max_p99_ms=p99)


# ------------------------------------------------------------------------------------------ reports


def test_read_final_stats(tmp_path):
    rows, total, errors, exceptions = report.read_final_stats(write_run(tmp_path) / report.FINAL_STATS_FILE)
    assert [r.name for r in rows] == ["grpc mnist b8", "http l2norm b4"]
    grpc, http = rows
    assert (grpc.protocol, grpc.model, grpc.batch) == ("grpc", "mnist", 8)
    assert grpc.requests_per_s == 100.0 and grpc.items_per_s == 800.0
    assert (grpc.p50_ms, grpc.p95_ms, grpc.p99_ms) == (5, 7, 9)
    assert http.failures == 5 and http.failure_ratio == 0.01
    assert total.name == "Aggregated" and total.requests == 1500 and total.items_per_s is None
    assert errors == FINAL_STATS["errors"] and exceptions == []


def test_read_final_stats_refuses_a_missing_or_foreign_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        report.read_final_stats(tmp_path / "nothing.json")
    foreign = tmp_path / "foreign.json"
    for text in ('{"stats": []}', "not json", '{"request_types": [{"name": "x"}]}'):
        foreign.write_text(text)
        with pytest.raises(ValueError, match="not a final statistics file"):
            report.read_final_stats(foreign)


def test_summary_files_round_trip_and_say_what_broke(tmp_path):
    run_dir = write_run(tmp_path / "run")
    summary = report.summarize_run(run_dir, {"users": 4}, Thresholds(max_p99_ms=9.5))
    json_path, md_path = report.write_summary(summary, run_dir)

    data = json.loads(json_path.read_text())
    assert data["passed"] is False and data["schema"] == report.SUMMARY_SCHEMA
    p99s = {e["name"]: e["p99_ms"] for e in data["request_types"]}
    assert p99s == {"grpc mnist b8": 9, "http l2norm b4": 10}
    assert data["errors"] == [
        {"name": "http l2norm b4", "error": "InferenceServerException: [400] bad input", "occurrences": 5}
    ]
    assert data["violations"] == [
        "http l2norm b4: failure ratio 0.0100 (5/500) above 0",
        "Aggregated: failure ratio 0.0033 (5/1500) above 0",
        "http l2norm b4: p99 10 ms above 9.5 ms",
    ]
    reloaded = report.load_summary(json_path)
    assert reloaded.request_types == summary.request_types and not reloaded.passed

    markdown = md_path.read_text()
    assert markdown.startswith("# Load test FAILED")
    assert "| grpc mnist b8 | 1000 | 0 | 100.0 | 800.0 | 5 | 7 | 9 | 14 |" in markdown
    assert "- http l2norm b4: p99 10 ms above 9.5 ms" in markdown
    assert "bad input" in markdown


def test_charts_are_written(tmp_path):
    run_dir = write_run(tmp_path / "run")
    chart = report.plot_run(run_dir / "locust_stats_history.csv", tmp_path / "chart.png", "test")
    assert chart is not None and chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report.plot_run(tmp_path / "no_history.csv", tmp_path / "none.png", "test") is None
    summary = report.summarize_run(run_dir, {"users": 1}, Thresholds())
    sweep = report.plot_sweep([(1, summary), (4, summary)], tmp_path / "scaling.png", "test")
    assert sweep.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------------- command line


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90.0), ("30s", 30.0), ("2m", 120.0), ("1h30m", 5400.0), ("1m5s", 65.0)]
)
def test_parse_duration_reads_locust_time_spans(text, seconds):
    assert options.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "5x", "0s", "1m-2s"])
def test_parse_duration_refuses_garbage(text):
    with pytest.raises(ValueError):
        options.parse_duration(text)


def test_parse_user_counts():
    assert options.parse_user_counts("1,4,16") == [1, 4, 16]
    for bad in ("", "0", "4,x", "-1"):
        with pytest.raises(ValueError):
            options.parse_user_counts(bad)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mix", "../etc=1"], "neither a request kind"),  # any other name: a model of the server
        (["--protocol", "http=0"], "no positive weight"),
        (["--users", "0"], "--users needs at least one count"),
        (["--run-time", "soon"], "bad duration"),
        (["--batch-size", "0"], "argument --batch-size: must be at least 1"),
        (["--max-failure-ratio", "2"], "expected a fraction between 0 and 1"),
        (["--timeout", "0"], "argument --timeout: must be more than 0"),
    ],
)
def test_bad_options_exit_2_with_the_reason(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        runner.main(args)
    assert exit_info.value.code == runner.EXIT_ERROR
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("LOADTEST_USERS", "many", "argument --users: $LOADTEST_USERS='many': --users takes whole numbers"),
        ("TRITON_HTTP_PORT", "80a", "argument --http-port: $TRITON_HTTP_PORT='80a': expected a port number"),
        ("LOADTEST_RUN_TIME", "1 minute", "$LOADTEST_RUN_TIME='1 minute': bad duration"),
        ("TRITON_PROTOCOL", "smtp", "$TRITON_PROTOCOL='smtp': unknown protocol 'smtp'"),
        ("LOADTEST_MAX_P99_MS", "-5", "$LOADTEST_MAX_P99_MS='-5': must be more than 0 ms"),
    ],
)
def test_a_bad_environment_value_is_a_usage_error_not_a_traceback(
    monkeypatch, capsys, variable, value, message
):
    """loadtests/README.md: every option has a variable; a bad one is reported like a bad flag (exit 2)."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit) as exit_info:
        runner.main([])
    assert exit_info.value.code == runner.EXIT_ERROR
    assert message in capsys.readouterr().err


def test_every_option_names_the_variable_it_reads_and_its_default(monkeypatch):
    """The help of an option says "(default: D; $VARIABLE)" (cli_options.add_env_argument writes it): D,
    set in that very variable, gives the same value as no variable at all; another value set there is read."""
    import re

    checked = []
    for action in runner.build_parser()._actions:
        match = re.search(r"\(default: ([^;()]+); \$(\w+)\)$", action.help or "")
        if not match or action.default is None:
            continue
        shown, variable = match.groups()
        monkeypatch.delenv(variable, raising=False)
        unset = getattr(runner.build_parser().parse_args([]), action.dest)
        monkeypatch.setenv(variable, shown)
        assert getattr(runner.build_parser().parse_args([]), action.dest) == unset, action.option_strings
        checked.append(action.option_strings[0])
    assert len(checked) >= 15, checked  # host, ports, workload, load and threshold options
    monkeypatch.setenv("LOADTEST_L2NORM_DIM", "64")
    assert runner.build_parser().parse_args([]).l2norm_dim == 64


def test_a_named_mnist_folder_without_digits_stops_the_run(tmp_path, capsys):
    assert runner.main(["--mnist-dir", str(tmp_path)]) == runner.EXIT_ERROR
    err = capsys.readouterr().err
    assert f"MNIST digits not found: {tmp_path} (the folder given)" in err


def test_the_runner_hands_locust_its_own_flags(monkeypatch):
    """The Locust subprocess parses exactly the flags `python -m loadtests` takes (loadtests/options.py)."""
    import argparse
    import dataclasses

    from loadtests.options import add_workload_arguments, locust_arguments, workload_from_args

    argv = ["--protocol", "grpc=3,http=1", "--mix", "mnist=2", "--batch-size", "16", "--l2norm-batch", "2"]
    argv += ["--l2norm-dim", "64", "--timeout", "7.5", "--mnist-dir", "/data/mnist", "--user-rate", "2.5"]
    parser = argparse.ArgumentParser()
    add_workload_arguments(parser)
    args = parser.parse_args(argv)
    workload = workload_from_args(args)
    assert workload.protocols == {"http": 1, "grpc": 3} and workload.mix["mnist"] == 2
    assert (workload.mnist_batch, workload.l2norm_batch, workload.l2norm_dim) == (16, 2, 64)
    assert workload.user_rate == 2.5
    with pytest.raises(SystemExit):  # a rate is a positive, finite number
        parser.parse_args(["--user-rate", "0"])
    again = parser.parse_args(locust_arguments(workload, args.timeout))
    assert workload_from_args(again) == workload and again.timeout == 7.5
    # ... and the locustfile defines them on Locust's own parser, next to Locust's --host (in a process of
    # its own: importing Locust monkey-patches the process for gevent).
    script = (
        "import json, sys\n"
        "from locust.argument_parser import get_parser\n"
        "from loadtests.options import add_workload_arguments, workload_from_args\n"
        "parser = get_parser()\n"
        "add_workload_arguments(parser)\n"
        "args = parser.parse_args(sys.argv[1:])\n"
        "import dataclasses\n"
        "print(json.dumps({'host': args.host, 'workload': dataclasses.asdict(workload_from_args(args))}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, "--host", "triton", *locust_arguments(workload, 7.5)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    parsed = json.loads(result.stdout.splitlines()[-1])
    assert parsed == {"host": "triton", "workload": json.loads(json.dumps(dataclasses.asdict(workload)))}


def test_the_runner_does_not_import_locust():
    """Locust monkey-patches the process that imports it; the runner (and pytest) must stay unpatched."""
    result = subprocess.run(
        [sys.executable, "-c", "import sys, loadtests.runner; print('locust' in sys.modules)"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert result.stdout.strip() == "False"


def test_without_a_data_set_the_sample_digits_stand_in(monkeypatch, tmp_path):
    """A clone without ../shared: the load test sends samples/digits/ and says so."""
    from loadtests import workloads

    monkeypatch.delenv("MNIST_DIR", raising=False)
    monkeypatch.setattr(mnist, "DEFAULT_DATA_DIR", tmp_path / "nowhere")
    workloads.digit_source.cache_clear()
    try:
        source = workloads.digit_source(None)
        assert source.images.shape == (10, 28, 28) and "sample digits" in source.description
        assert source.note.startswith("no MNIST data set: MNIST digits not found")
        assert "Sending the 10 sample digits of" in source.note
        inputs = workloads.MnistBatchTask.__new__(workloads.MnistBatchTask)
        inputs.batch, inputs.images = 16, mnist.to_tensor(source.images)
        assert inputs.make_inputs()["image"].shape == (16, 1, 28, 28)  # batches larger than the pool
    finally:
        workloads.digit_source.cache_clear()


def test_no_server_exits_2_and_says_how_to_get_one(tmp_path, capsys):
    port = free_port()  # nothing listens there
    args = ["--http-port", str(port), "--grpc-port", str(free_port()), "--wait-for-server", "1"]
    assert runner.main([*args, "--reports-dir", str(tmp_path)]) == runner.EXIT_ERROR
    assert "make serve" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing half-written


# ------------------------------------------------------------------------------------------ baseline


def test_baseline_record_groups_rows_by_request_type_and_its_page_is_made_from_it(tmp_path):
    from loadtests.record import Record, read_record, write_record
    from loadtests.studies import baseline

    summary = report.summarize_run(write_run(tmp_path / "run"), {"users": 1}, Thresholds())
    record = Record("baseline", "python -m ...", "D", {"commit": "C", "server": "S", "machine": {"cpu": "X"}})
    record.figures = baseline.baseline_figures([(4, summary, 12.3), (1, summary, None)], 25.0, 300.0)
    # The page comes from the record alone: what is written as JSON reads back to the same page.
    write_record(record, tmp_path / "baseline-x.md", baseline.baseline_markdown(record, "baseline-x.png"))
    text = (tmp_path / "baseline-x.md").read_text()
    assert baseline.baseline_markdown(read_record(tmp_path / "baseline-x.json"), "baseline-x.png") == text
    rows = [line for line in text.splitlines() if line.startswith("| grpc") or line.startswith("| http")]
    assert [row.split(" | ")[:2] for row in rows] == [
        ["| grpc mnist b8", "1"],
        ["| grpc mnist b8", "4"],
        ["| http l2norm b4", "1"],
        ["| http l2norm b4", "4"],
    ]
    assert rows[1].endswith("| 12% |") and rows[0].endswith("| n/a |")
    assert "- cpu: X" in text and "![requests/s and p99 by number of users](baseline-x.png)" in text
    assert "- date: D" in text and "- commit: C" in text and "- command: `python -m ...`" in text
    # The measured runs had failures: the baseline says so.
    assert "Thresholds broken during the measurement" in text


def test_a_record_says_what_was_run_where_and_when(tmp_path):
    from loadtests.record import RECORD_SCHEMA, Record, default_output, read_record, write_record

    record = Record.begin("queue-signal", "python -m loadtests.queue_signal", ["--users", "1"], server="cpu")
    assert record.command == "python -m loadtests.queue_signal --users 1"
    assert record.when.endswith(" UTC") and record.where["server"] == "cpu"
    assert record.where["machine"]["cores (nproc)"].isdigit() and record.where["commit"]
    record.figures = {"points": [{"users": 1, "queue_us_per_request": 512.0}]}
    json_path, md_path = write_record(record, tmp_path / "q" / "queue-signal-x.md", ["# page"])
    assert md_path.read_text() == "# page\n"
    assert json.loads(json_path.read_text())["schema"] == RECORD_SCHEMA
    assert read_record(md_path) == record
    assert default_output("soak").parent == REPO_ROOT / "records" / "soak"
    with pytest.raises(ValueError, match="not a record of schema"):
        Record.from_dict({"totals": {}})


def test_cpu_busy_percent_is_a_percentage():
    from loadtests.studies import quiet

    busy = quiet.cpu_busy_percent(0.2)
    assert busy is not None and 0.0 <= busy <= 100.0


# ---------------------------------------------------------------------------------------------------
# A folder of PNG digits instead of the MNIST set (the compose loadtest service without a mounted set)


def test_a_folder_of_sample_digits_is_a_digit_pool():
    digits = digit_images(str(SAMPLES_DIR))
    assert digits.shape == (10, 28, 28) and digits.dtype == np.uint8
    with Image.open(SAMPLES_DIR / "7.png") as seven:
        assert np.array_equal(digits[7], np.asarray(seven))  # sorted by name, pixels as stored
    task = MnistPipelineTask(str(SAMPLES_DIR))
    assert len(task.pngs) == 10


def test_a_folder_without_proper_digits_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"MNIST digits not found: {tmp_path} \\(the folder given\\)"):
        digit_images(str(tmp_path))
    Image.new("L", (32, 28)).save(tmp_path / "wide.png")
    with pytest.raises(ValueError, match="32x28; digits must be 28x28"):
        digit_images(str(tmp_path))


def test_compose_mounts_the_mnist_set_where_the_load_test_looks_by_default():
    """The loadtest service needs no MNIST variable: the set is mounted at the default place inside the
    image (../shared/data/mnist beside its checkout), and without it the load test sends samples/digits/."""
    import re

    import yaml

    workdir = re.search(r"^WORKDIR (\S+)$", (REPO_ROOT / "docker" / "python.Dockerfile").read_text(), re.M)[1]
    default_inside = Path(workdir).parent / mnist.DEFAULT_DATA_DIR.relative_to(REPO_ROOT.parent)
    service = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())["services"]["loadtest"]
    volume_pattern = re.compile(r"^(?P<source>\$\{[^}]*\}|[^:]+):(?P<target>[^:]+)")
    mounts = {volume_pattern.match(volume)["target"]: volume for volume in service["volumes"]}
    assert f"{default_inside}" in mounts, mounts
    assert mounts[str(default_inside)].startswith("${MNIST_DIR:-../shared/data/mnist}:")
    assert not any(name.startswith("MNIST") for name in service.get("environment", {}))


def test_only_errors_of_the_path_are_retried():
    from geventhttpclient.response import HTTPConnectionClosed  # noqa: PLC0415
    from tritonclient.utils import InferenceServerException  # noqa: PLC0415

    from loadtests.outcomes import ResponseCheckError
    from loadtests.workloads import is_retryable

    retried = [
        ConnectionRefusedError(),
        ConnectionResetError(),
        BrokenPipeError(),
        HTTPConnectionClosed("connection closed."),
        InferenceServerException("bad gateway", status="502"),
        InferenceServerException("no server", status="503"),
        InferenceServerException("Received http2 header with status: 502", status="StatusCode.UNAVAILABLE"),
    ]
    never = [
        InferenceServerException("wrong shape", status="400"),
        InferenceServerException("model raised", status="StatusCode.INTERNAL"),
        InferenceServerException("bad input", status="StatusCode.INVALID_ARGUMENT"),
        InferenceServerException("deadline", status="StatusCode.DEADLINE_EXCEEDED"),
        InferenceServerException("API 'model-repository' is restricted", status="StatusCode.UNAVAILABLE"),
        ResponseCheckError("wrong answer"),
        ValueError("bug"),
    ]
    assert all(is_retryable(error) for error in retried)
    assert not any(is_retryable(error) for error in never)


@pytest.mark.parametrize(
    "module", ["loadtests", "loadtests.soak", "loadtests.baseline", "loadtests.queue_signal"]
)
def test_every_tool_that_starts_a_server_names_its_variant_alike(module):
    """One flag name for one thing: --server-variant, from $TRITON_VARIANT like `make serve`'s --variant."""
    result = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT
    )
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "--server-variant {auto,tensorrt,cpu}" in text
    assert "$TRITON_VARIANT" in text


def test_triton_counters_are_read_through_the_one_metrics_reader():
    """The soak's sampler, the queue signal, the failover and the response cache study read Prometheus through
    trt_plugin_kit.tritonserver.metrics; no load-test module fetches or parses the metrics text itself (one
    that fetches a URL, like perf's readiness check, names no metrics endpoint)."""
    import re

    readers = set()
    for path in sorted((REPO_ROOT / "loadtests").rglob("*.py")):
        text = path.read_text()
        name = str(path.relative_to(REPO_ROOT))
        fetches = re.search(r"urllib\.request|urlopen|http\.client|requests\.get", text)
        assert not (fetches and re.search(r"/metrics|metrics_url|metrics_port", text)), name
        reader = r"from trt_plugin_kit\.tritonserver(\.metrics)? import .*\b(metrics|read_metrics)\b"
        if re.search(reader, text):
            readers.add(name)
    assert readers == {
        "loadtests/response_cache.py",
        "loadtests/soak/workers.py",
        "loadtests/studies/failover.py",
        "loadtests/studies/queue_signal.py",
    }
