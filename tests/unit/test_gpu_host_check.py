"""`make gpu-host-check` (trt_plugin_kit/deploy/gpu_host_check.py): the parts that run without a GPU.

Arguments, the driver check, the builder's and the server's log checks (the log lines as Triton's
tensorrt_backend and our builder write them), the comparison of the TensorRT variant's answers with the CPU
variant's, the one-line summary, and the refusal on a host without the NVIDIA runtime (the comparison against
a real server: tests/server/test_gpu_host_check_answers.py). Docker with a GPU never runs here.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from trt_plugin_kit.deploy import gpu_host_check as check
from trt_plugin_kit.interface import L2NORM, MNIST, MNIST_PIPELINE, REPO_ROOT


def test_defaults_and_ports():
    args = check.parse_args([])
    assert (args.http_port, args.grpc_port, args.metrics_port) == (8000, 8001, 8002)
    assert not args.keep_running and not args.skip_build
    args = check.parse_args(["--http-port", "9300", "--grpc-port", "9301", "--metrics-port", "9302"])
    assert (args.http_port, args.grpc_port, args.metrics_port) == (9300, 9301, 9302)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--http-port", "0"], "a port from 1 to 65535, not 0"),
        (["--grpc-port", "70000"], "a port from 1 to 65535, not 70000"),
        (["--metrics-port", "x"], "a port number, not 'x'"),
        (["--grpc-port", "8000"], "must differ"),
        (["--ready-timeout", "0"], "--ready-timeout must be positive"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        check.parse_args(argv)
    assert exit_info.value.code == check.EXIT_USAGE and message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("csv", "problem"),
    [
        ("0, NVIDIA H200, 580.95.05\n1, NVIDIA H200, 580.95.05\n", None),
        ("0, NVIDIA A100-SXM4-80GB, 580.65.06\n", None),
        ("0, NVIDIA H100 80GB HBM3, 575.57.08\n", "driver 575.57.08 is older than 580.65.06"),
        ("0, Tesla T4, 535.129.03\n", "older than 580.65.06, CUDA 13's minimum"),
        ("0, NVIDIA H200, N/A\n", "not a driver version: 'N/A'"),
        ("", "nvidia-smi lists no GPU"),
    ],
)
def test_the_driver_must_be_cuda_13_s_minimum(csv, problem):
    gpus, problems = check.driver_problems(csv)
    if problem is None:
        assert problems == [] and gpus[0].startswith("GPU 0: NVIDIA")
    else:
        assert problems and problem in problems[0], problems


BUILDER_LOG = """== builder: libtrt_plugin_kit.so against TensorRT 11.3.0.12 (/usr/include/x86_64-linux-gnu), 4 jobs
== builder: the library's links and creators
ok: /opt/trt_plugin_kit/plugins/libtrt_plugin_kit.so: links libnvinfer.so.11 (/usr/lib/x86_64-linux-gnu/libnvinfer.so.11), all 12 libraries resolve (TensorRT 11.3.0.12)
loaded plugin library /opt/trt_plugin_kit/plugins/libtrt_plugin_kit.so: 7 creator(s) registered themselves when loaded
ok: /opt/trt_plugin_kit/plugins/libtrt_plugin_kit.so: 7 creators registered themselves when loaded in TensorRT 11.3.0.12's registry: ConcatCopy, FullyConnected, L2Normalize, LeakyReLU, PReLU, Pool, SwiGLUSplit (version 1, namespace trt_plugin_kit)
mnist plugin fp32: wrote /opt/trt_plugin_kit/model_repository/mnist/1/model.plan (0.45 MB), I/O matches config.pbtxt
l2norm plugin fp32: wrote /opt/trt_plugin_kit/model_repository/l2norm/1/model.plan (0.02 MB), I/O matches config.pbtxt
== builder: done (TensorRT 11.3.0.12)
"""  # noqa: E501


def test_a_complete_builder_log_passes():
    assert check.builder_log_problems(BUILDER_LOG, "11.3.0.12") == []


@pytest.mark.parametrize(
    ("cut", "problem"),
    [
        ("ok: /opt/trt_plugin_kit/plugins/libtrt_plugin_kit.so: links", "links were not checked"),
        ("ok: /opt/trt_plugin_kit/plugins/libtrt_plugin_kit.so: 7 creators", "creators not checked"),
        ("l2norm plugin fp32: wrote", "no engine written for l2norm"),
        ("== builder: done", "did not finish with TensorRT 11.3.0.12"),
    ],
)
def test_a_builder_log_missing_a_step_names_it(cut, problem):
    log = "\n".join(line for line in BUILDER_LOG.splitlines() if not line.startswith(cut))
    assert any(problem in found for found in check.builder_log_problems(log, "11.3.0.12"))


def test_the_builder_must_finish_with_the_tensorrt_compared():
    assert check.builder_log_problems(BUILDER_LOG, "11.3.0.13")


def test_graph_batch_sizes_come_from_the_tensorrt_configs():
    sizes = check.graph_batch_sizes()
    assert set(sizes) == {MNIST, L2NORM} and all(sizes.values())
    assert 1 in sizes[MNIST]


def server_log(sizes: dict[str, set[int]], instances=("0_0", "0_1"), launches=True) -> str:
    """Lines as tensorrt_backend writes them (src/instance_state.cc), in a verbose tritonserver log."""
    lines = ["triton: ok: TensorRT 11.3.0.12: the artifacts were built with it"]
    for model, batches in sizes.items():
        for instance in instances:
            for batch in sorted(batches):
                lines.append(f"I1128 12:00:00.1 1 instance_state.cc:4023] captured CUDA graph for "
                             f"{model}_{instance}, batch size {batch}")  # fmt: skip
        if launches:
            lines.append(f"I1128 12:00:01.1 1 instance_state.cc:1323] Context with profile default [0] is "
                         f"launching CUDA graph for {model}_{instances[0]}")  # fmt: skip
    return "\n".join(lines)


def test_a_server_log_with_every_graph_captured_and_launched_passes():
    sizes = check.graph_batch_sizes()
    assert check.server_log_problems(server_log(sizes), sizes) == []


def test_a_missing_graph_a_graph_never_launched_and_backend_warnings_are_named():
    sizes = check.graph_batch_sizes()
    log = server_log(sizes, launches=False)
    largest = max(sizes[MNIST])
    log = log.replace(f"{MNIST}_0_1, batch size {largest}\n", f"{MNIST}_0_1, batch size 0\n")
    log += "\nW1128 instance_state.cc:3919] unable to record CUDA graph for l2norm_0_0"
    log += "\nE1128 tensorrt.cc:147] unable to load shared library: libtrt_plugin_kit.so: cannot open"
    problems = check.server_log_problems(log, sizes)
    assert any(p.startswith(f"{MNIST}_0_1: graphs for batch sizes") for p in problems), problems
    assert f"{MNIST}: no request ran through a CUDA graph" in problems
    assert any("unable to record CUDA graph for l2norm_0_0" in p for p in problems)
    assert any("unable to load shared library" in p for p in problems)
    assert check.server_log_problems("", sizes)[0].startswith(f"{MNIST}: no CUDA graph captured")


def test_instances_belong_to_the_longest_model_name():
    models = [MNIST, MNIST_PIPELINE, L2NORM]
    assert check.model_of_instance("mnist_pipeline_0_0", models) == MNIST_PIPELINE
    assert check.model_of_instance("mnist_0_1", models) == MNIST
    assert check.model_of_instance("other_0", models) is None


def test_answers_are_compared_in_value_shape_and_digit():
    probabilities = np.full((4, 10), 0.01, dtype=np.float32)
    probabilities[np.arange(4), [0, 1, 2, 3]] = 0.91
    assert check.answer_problems(MNIST, probabilities, probabilities.copy()) == []
    nudged = probabilities + 5e-5
    assert check.answer_problems(MNIST, nudged, probabilities) == []
    swapped = probabilities[[1, 0, 2, 3]]
    problems = check.answer_problems(MNIST_PIPELINE, swapped, probabilities)
    assert any("digits [1, 0, 2, 3] on the GPU, [0, 1, 2, 3] on the CPU" in p for p in problems)
    assert "shape [4, 9] on the GPU" in check.answer_problems(MNIST, probabilities[:, :9], probabilities)[0]
    broken = probabilities.copy()
    broken[0, 0] = np.nan
    assert "NaN" in check.answer_problems(MNIST, broken, probabilities)[0]
    assert "no 'normalized' in the TensorRT" in check.answer_problems(L2NORM, None, probabilities)[0]
    vectors = np.ones((4, 96), dtype=np.float32) / np.sqrt(96)
    assert (
        "differs from the CPU variant by up to" in check.answer_problems(L2NORM, vectors + 1e-4, vectors)[0]
    )


def test_the_summary_says_in_one_line_what_passed_and_what_did_not(capsys):
    report = check.Report()
    report.add("driver and GPUs", [], "GPU 0: NVIDIA H200")
    report.add("answers", ["l2norm: differs"], "")
    report.add("server log", [], "ok")
    assert report.summary() == "gpu-host-check: FAIL: 2 of 3 steps passed; failed: answers"
    assert "[FAIL] answers: l2norm: differs" in capsys.readouterr().out
    assert check.Report().summary().startswith("gpu-host-check: FAIL")  # nothing ran: not a pass


def test_the_verbose_override_runs_the_service_s_own_command(tmp_path):
    import yaml

    override = yaml.safe_load(check.verbose_override(tmp_path).read_text())
    compose = yaml.safe_load(check.COMPOSE_FILE.read_text())
    original = compose["services"]["triton"]["command"]
    command = override["services"]["triton"]["command"]
    assert command.index("--log-verbose=1") < command.index("--")
    assert [arg for arg in command if arg != "--log-verbose=1"] == original


def test_a_host_without_the_nvidia_runtime_is_told_so_with_exit_3(tmp_path):
    """This machine: Docker without the NVIDIA runtime (or no Docker at all), no driver."""
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "gpu_host_check.py")],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, env=env,
    )  # fmt: skip
    assert result.returncode == check.EXIT_CANNOT_RUN, result.stderr
    assert result.stderr.startswith("gpu-host-check: this host cannot run it: ")
    assert any(
        reason in result.stderr
        for reason in (
            "no docker command",
            "Docker daemon does not answer",
            "no NVIDIA runtime",
            "no nvidia-smi",
        )
    ), result.stderr
    assert "Traceback" not in result.stderr
