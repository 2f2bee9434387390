"""``make gpu-host-check``: the GPU path end to end on a GPU host, the first thing a GPU user runs (issue 45).

On a host with an NVIDIA GPU, Docker and the NVIDIA Container Toolkit it

1. prints the driver (and checks it is at least :data:`MIN_DRIVER`) and the GPUs;
2. builds the compose `builder` and `triton` images and prints both images' TensorRT, compared in full;
3. runs the builder: the plugin library (the library target alone), its links and creators, the engines;
4. starts the `triton` service (its entrypoint checks the artifacts' TensorRT and the library's links),
   with Triton's verbose log for the CUDA-graph lines;
5. sends every model a request over HTTP and over gRPC, and the same requests to the CPU variant started
   here (PyTriton's tritonserver, ONNX Runtime), and compares the answers;
6. checks the server's log: every CUDA graph of the TensorRT configurations captured, requests launching
   them, no plugin library that failed to load;

and ends with one line saying what passed and what did not. The server is stopped at the end
(``--keep-running`` leaves it up); the `artifacts` volume is kept. Exit codes: 0 all passed, 1 a step
failed, 2 bad arguments, 3 this host cannot run the check (no Docker, no NVIDIA runtime, no GPU).

The parts that need no GPU (arguments, the log checks, the comparison of answers, of versions and of the
driver) are tested in tests/unit/test_gpu_host_check.py; the rest has not run on this project's machines.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from trt_plugin_kit.engines.artifact_checks import compare_versions
from trt_plugin_kit.engines.errors import CheckFailed
from trt_plugin_kit.interface import (
    L2NORM,
    L2NORM_INPUT,
    L2NORM_OUTPUT,
    MNIST,
    MNIST_INPUT,
    MNIST_OUTPUT,
    MNIST_PIPELINE,
    MNIST_PREPROCESS,
    MODEL_REPOSITORY,
    PIPELINE_INPUT,
    PROTOCOLS,
    REPO_ROOT,
    SAMPLES_DIR,
    TENSORRT_MODELS,
)

# CUDA 13's minimum Linux driver (CUDA 13.0 GA: >= 580.65.06). The NGC 26.09 images are CUDA 13 builds; by
# CUDA's minor-version compatibility every 13.x runs on it (NVIDIA's release notes of the image may name a
# newer one for some features).
MIN_DRIVER = (580, 65, 6)
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANNOT_RUN = 0, 1, 2, 3
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
# Answers of the TensorRT engines (FP32, TF32 off) against ONNX Runtime's on the CPU.
TOLERANCES = {MNIST: 1e-4, MNIST_PIPELINE: 1e-4, L2NORM: 1e-5, MNIST_PREPROCESS: 0.0}

CAPTURED = re.compile(r"captured CUDA graph for (?P<instance>\S+), batch size (?P<batch>\d+)")
LAUNCHING = re.compile(r"is launching CUDA graph for (?P<instance>\S+)")
GRAPH_TROUBLE = re.compile(
    r"unable to (?:record|start|finish|instantiate) CUDA graph|CUDA graph is not captured"
)
PLUGIN_LOAD_FAILED = "unable to load shared library"


class CannotRun(Exception):
    """This host lacks what the check needs (Docker, the NVIDIA runtime, a GPU); the message says what."""


@dataclass
class Step:
    name: str
    ok: bool
    detail: str


@dataclass
class Report:
    steps: list[Step] = field(default_factory=list)

    def add(self, name: str, problems: Sequence[str], detail: str = "") -> bool:
        ok = not problems
        self.steps.append(Step(name, ok, detail if ok else "; ".join(problems)))
        print(f"[{'PASS' if ok else 'FAIL'}] {name}: {self.steps[-1].detail}", flush=True)
        return ok

    def summary(self) -> str:
        passed = [step.name for step in self.steps if step.ok]
        failed = [step.name for step in self.steps if not step.ok]
        verdict = "PASS" if not failed and self.steps else "FAIL"
        line = f"gpu-host-check: {verdict}: {len(passed)} of {len(self.steps)} steps passed"
        return line + (f"; failed: {', '.join(failed)}" if failed else "")


# -------------------------------------------------------------------------------------- arguments


def port_number(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port number, not {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port from 1 to 65535, not {port}")
    return port


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="make gpu-host-check",
        description="The GPU path end to end on this host: images, TensorRT versions, library, engines, "
        "server, every model over HTTP and gRPC against the CPU variant, CUDA graphs.",
        epilog="Exit codes: 0 all passed, 1 a step failed, 2 bad arguments, 3 this host cannot run it.",
    )
    parser.add_argument("--http-port", type=port_number, default=8000, help="the triton service's (8000)")
    parser.add_argument("--grpc-port", type=port_number, default=8001)
    parser.add_argument("--metrics-port", type=port_number, default=8002)
    parser.add_argument("--keep-running", action="store_true", help="leave the triton service up at the end")
    parser.add_argument("--skip-build", action="store_true", help="use the images and artifacts built before")
    parser.add_argument(
        "--ready-timeout", type=float, default=300.0, help="seconds for the server to be ready"
    )
    args = parser.parse_args(argv)
    ports = (args.http_port, args.grpc_port, args.metrics_port)
    if len(set(ports)) != 3:
        parser.error(f"--http-port, --grpc-port and --metrics-port must differ, got {ports}")
    if args.ready_timeout <= 0:
        parser.error("--ready-timeout must be positive")
    return args


# ------------------------------------------------------------------------------------------ driver


def parse_driver(text: str) -> tuple[int, ...]:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)*)\s*", text)
    if not match:
        raise CheckFailed(f"not a driver version: {text.strip()!r}")
    return tuple(int(part) for part in match[1].split("."))


def driver_problems(nvidia_smi_csv: str) -> tuple[list[str], list[str]]:
    """(GPU lines, problems) from `nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader`."""
    gpus, problems = [], []
    for line in filter(None, (raw.strip() for raw in nvidia_smi_csv.splitlines())):
        parts = [part.strip() for part in line.split(",")]
        index, name, driver = (
            (parts[0], ", ".join(parts[1:-1]), parts[-1]) if len(parts) >= 3 else ("?", line, "")
        )
        gpus.append(f"GPU {index}: {name}, driver {driver}")
        try:
            if parse_driver(driver) < MIN_DRIVER:
                minimum = ".".join(f"{part:02d}" if i else str(part) for i, part in enumerate(MIN_DRIVER))
                problems.append(f"driver {driver} is older than {minimum}, CUDA 13's minimum (the images')")
        except CheckFailed as error:
            problems.append(str(error))
    if not gpus:
        problems.append("nvidia-smi lists no GPU")
    return gpus, list(dict.fromkeys(problems))


# ------------------------------------------------------------------------------------------ log checks


def builder_log_problems(log: str, tensorrt_version: str) -> list[str]:
    """What the builder's output must show: links and creators checked, every engine written, done."""
    problems = []
    if not re.search(r"^ok: \S+libtrt_plugin_kit\.so: links libnvinfer\.so\.\d+ ", log, re.MULTILINE):
        problems.append("no 'ok: ... links libnvinfer' line: the library's links were not checked")
    if not re.search(r"^ok: \S+: \d+ creators registered themselves when loaded", log, re.MULTILINE):
        problems.append("no 'creators registered themselves when loaded' line: creators not checked")
    for model in TENSORRT_MODELS:
        if not re.search(rf"wrote \S+/{model}/1/model\.plan", log):
            problems.append(f"no engine written for {model}")
    if f"== builder: done (TensorRT {tensorrt_version})" not in log:
        problems.append(f"the builder did not finish with TensorRT {tensorrt_version}")
    return problems


def graph_batch_sizes(repository: Path = MODEL_REPOSITORY) -> dict[str, set[int]]:
    """Batch sizes of the CUDA graphs each TensorRT model's config.pbtxt asks for (graph_spec)."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    sizes = {}
    for model in TENSORRT_MODELS:
        text = (repository / model / "config.pbtxt").read_text()
        config = text_format.Parse(text, model_config_pb2.ModelConfig())
        sizes[model] = {spec.batch_size for spec in config.optimization.cuda.graph_spec}
    return sizes


def model_of_instance(instance: str, models: Iterable[str]) -> str | None:
    """The model an instance name belongs to (Triton names them <model>_<group>...; the longest match)."""
    matches = [model for model in models if instance.startswith(f"{model}_")]
    return max(matches, key=len) if matches else None


def server_log_problems(log: str, expected: Mapping[str, set[int]]) -> list[str]:
    """Every expected CUDA graph captured by every instance, requests launching them, nothing failing."""
    problems = []
    captured: dict[str, dict[str, set[int]]] = {model: {} for model in expected}
    for match in CAPTURED.finditer(log):
        model = model_of_instance(match["instance"], expected)
        if model is not None:
            captured[model].setdefault(match["instance"], set()).add(int(match["batch"]))
    launched = {model_of_instance(match["instance"], expected) for match in LAUNCHING.finditer(log)}
    for model, sizes in expected.items():
        if not captured[model]:
            problems.append(f"{model}: no CUDA graph captured (expected batch sizes {sorted(sizes)})")
        for instance, got in sorted(captured[model].items()):
            if got != sizes:
                problems.append(f"{instance}: graphs for batch sizes {sorted(got)}, expected {sorted(sizes)}")
        if sizes and model not in launched:
            problems.append(f"{model}: no request ran through a CUDA graph")
    trouble = sorted({line.strip() for line in log.splitlines() if GRAPH_TROUBLE.search(line)})
    problems += [f"log: {line}" for line in trouble[:5]]
    problems += [f"log: {line.strip()}" for line in log.splitlines() if PLUGIN_LOAD_FAILED in line][:3]
    return problems


# --------------------------------------------------------------------------------- requests, answers


def sample_requests(samples: Path = SAMPLES_DIR, batch: int = 4) -> dict[str, dict[str, np.ndarray]]:
    """One request per model: `batch` sample digits (PNG; preprocessed for mnist) and random vectors."""
    from trt_plugin_kit.serving.preprocess import decode_digit

    pngs = [(samples / f"{digit}.png").read_bytes() for digit in range(batch)]
    vectors = np.random.default_rng(45).standard_normal((batch, 96)).astype(np.float32)
    return {
        MNIST_PIPELINE: {PIPELINE_INPUT: np.array(pngs, dtype=np.object_).reshape(batch, 1)},
        MNIST_PREPROCESS: {PIPELINE_INPUT: np.array(pngs, dtype=np.object_).reshape(batch, 1)},
        MNIST: {MNIST_INPUT: np.stack([decode_digit(png) for png in pngs]).astype(np.float32)},
        L2NORM: {L2NORM_INPUT: vectors},
    }


OUTPUTS = {
    MNIST_PIPELINE: MNIST_OUTPUT,
    MNIST_PREPROCESS: MNIST_INPUT,
    MNIST: MNIST_OUTPUT,
    L2NORM: L2NORM_OUTPUT,
}


def answer_problems(model: str, gpu: np.ndarray | None, cpu: np.ndarray | None) -> list[str]:
    """The TensorRT variant's answer against the CPU variant's for the same request."""
    if gpu is None or cpu is None:
        return [
            f"{model}: no '{OUTPUTS[model]}' in the {'TensorRT' if gpu is None else 'CPU'} variant's answer"
        ]
    if gpu.shape != cpu.shape:
        return [f"{model}: shape {list(gpu.shape)} on the GPU, {list(cpu.shape)} on the CPU"]
    if not np.all(np.isfinite(gpu)):
        return [f"{model}: the GPU's answer holds NaN or infinity"]
    difference = float(np.max(np.abs(gpu.astype(np.float64) - cpu.astype(np.float64)))) if gpu.size else 0.0
    problems = []
    if difference > TOLERANCES[model]:
        problems.append(
            f"{model}: differs from the CPU variant by up to {difference:.3g} (> {TOLERANCES[model]})"
        )
    if OUTPUTS[model] == MNIST_OUTPUT and not np.array_equal(gpu.argmax(axis=-1), cpu.argmax(axis=-1)):
        problems.append(
            f"{model}: digits {gpu.argmax(-1).tolist()} on the GPU, {cpu.argmax(-1).tolist()} on the CPU"
        )
    return problems


def compare_servers(gpu_infer: Callable, cpu_infer: Callable) -> tuple[list[str], list[str]]:
    """(what was compared, problems): every model over both protocols on both servers.

    ``*_infer(protocol, model, inputs, output)`` returns the output array (or raises)."""
    compared, problems = [], []
    for model, inputs in sample_requests().items():
        for protocol in PROTOCOLS:
            answers, failed = [], False
            for infer in (gpu_infer, cpu_infer):
                try:
                    answers.append(infer(protocol, model, inputs, OUTPUTS[model]))
                except Exception as error:  # noqa: BLE001 - every failure is reported, the check goes on
                    answers.append(None)
                    failed = True
                    where = "TensorRT" if infer is gpu_infer else "CPU"
                    problems.append(f"{model} over {protocol}: the {where} variant failed: {error}")
            if not failed:
                found = answer_problems(model, *answers)
                problems += [f"{problem} ({protocol})" for problem in found]
                compared.append(f"{model}/{protocol}")
    return compared, problems


# ------------------------------------------------------------------------------------- on the host


class Host:
    """Docker and compose on this host; every command's output is kept for the report."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.env = {
            "TRITON_HTTP_PORT": str(args.http_port),
            "TRITON_GRPC_PORT": str(args.grpc_port),
            "TRITON_METRICS_PORT": str(args.metrics_port),
        }

    def run(self, command: Sequence[str], timeout: float = 3600) -> subprocess.CompletedProcess:
        return subprocess.run(
            list(command), capture_output=True, text=True, timeout=timeout, check=False, cwd=REPO_ROOT,
            env={**os.environ, **self.env},
        )  # fmt: skip

    def compose(self, *arguments: str, files: Sequence[Path] = (), timeout: float = 3600):
        from trt_plugin_kit.deploy.compose import compose_binary

        chosen = [argument for path in (COMPOSE_FILE, *files) for argument in ("-f", str(path))]
        return self.run([*compose_binary(), *chosen, "--profile", "gpu", *arguments], timeout=timeout)


def prerequisites(host: Host) -> list[str]:
    """GPU lines; CannotRun where Docker, its NVIDIA runtime or nvidia-smi is missing."""
    if shutil.which("docker") is None:
        raise CannotRun("no docker command: install Docker Engine and the NVIDIA Container Toolkit")
    info = host.run(["docker", "info", "--format", "{{json .Runtimes}}"], timeout=60)
    if info.returncode != 0:
        raise CannotRun(f"the Docker daemon does not answer: {info.stderr.strip()[-300:]}")
    cdi = any(any(Path(folder).glob("nvidia*.yaml")) for folder in ("/etc/cdi", "/var/run/cdi"))
    if "nvidia" not in info.stdout and not cdi:
        raise CannotRun(
            "Docker has no NVIDIA runtime and no CDI spec for the GPUs: install the NVIDIA Container "
            "Toolkit (nvidia-ctk runtime configure --runtime=docker, then restart Docker)"
        )
    if shutil.which("nvidia-smi") is None:
        raise CannotRun("no nvidia-smi: no NVIDIA driver on this host")
    query = host.run(["nvidia-smi", "--query-gpu=index,name,driver_version", "--format=csv,noheader"], 60)
    gpus, problems = driver_problems(query.stdout if query.returncode == 0 else "")
    if problems:
        raise CannotRun("; ".join(problems))
    return gpus


def image_versions(host: Host) -> dict[str, str]:
    versions = {}
    for service in ("builder", "triton"):
        command = ["python3", "-m", "trt_plugin_kit.engines.artifact_checks", "version"]
        result = host.compose("run", "--rm", "--no-deps", "--entrypoint", *command[:1], service, *command[1:])
        lines = result.stdout.strip().splitlines() if result.returncode == 0 else []
        versions[service] = lines[-1] if lines else f"unreadable ({result.stderr.strip()[-200:]})"
    return versions


def verbose_override(directory: Path) -> Path:
    """A compose file that runs the triton service's own command with Triton's verbose log."""
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    command = list(compose["services"]["triton"]["command"])
    command.insert(command.index("--"), "--log-verbose=1")
    override = directory / "compose.gpu-host-check.yml"
    override.write_text(yaml.safe_dump({"services": {"triton": {"command": command}}}))
    return override


def tritonclient_infer(location) -> Callable:
    from trt_plugin_kit.tritonserver.protocol import Connection

    def infer(protocol: str, model: str, inputs: Mapping[str, np.ndarray], output: str) -> np.ndarray | None:
        connection = Connection(protocol, location.address(protocol), timeout_s=60)
        try:
            return connection.infer(model, inputs, [output]).get(output)
        finally:
            connection.close()

    return infer


def serve_and_compare(host: Host, report: Report, override: Path) -> None:
    from trt_plugin_kit.serving.host import Ports
    from trt_plugin_kit.serving.server import TritonServer
    from trt_plugin_kit.tritonserver.options import ServerLocation
    from trt_plugin_kit.tritonserver.protocol import NotReady, wait_until_ready

    args = host.args
    started = host.compose("up", "-d", "--no-deps", "--no-build", "triton", files=[override], timeout=600)
    if not report.add(
        "server starts", [started.stderr.strip()[-400:]] if started.returncode else [], "triton up"
    ):
        return
    location = ServerLocation("127.0.0.1", args.http_port, args.grpc_port, args.metrics_port)
    try:
        metadata = wait_until_ready(location, models=(MNIST, L2NORM, MNIST_PREPROCESS, MNIST_PIPELINE),
                                    timeout_s=args.ready_timeout)  # fmt: skip
        ready = []
    except NotReady as error:
        metadata, ready = {}, [f"not ready after {args.ready_timeout:.0f} s: {error}"]
    if not report.add("server ready", ready, f"Triton {metadata.get('version', '?')}, every model ready"):
        return
    with TritonServer(variant="cpu", ports=Ports.free()) as cpu:
        compared, problems = compare_servers(tritonclient_infer(location), tritonclient_infer(cpu.location))
    report.add("answers", problems, f"{len(compared)} model/protocol pairs equal the CPU variant's")
    log = host.compose("logs", "--no-color", "triton", timeout=120).stdout
    entry = "ok: TensorRT " in log and "the artifacts were built with it" in log
    problems = server_log_problems(log, graph_batch_sizes())
    problems += [] if entry else ["the entrypoint's TensorRT check did not report ok"]
    report.add("server log", problems, "entrypoint check ok, every CUDA graph captured and launched")


def run_check(args: argparse.Namespace) -> Report:
    host, report = Host(args), Report()
    gpus = prerequisites(host)
    report.add("driver and GPUs", [], "; ".join(gpus))
    if not args.skip_build:
        built = host.compose("build", "builder", "triton")
        if not report.add("images", [built.stderr.strip()[-400:]] if built.returncode else [], "built"):
            return report
    versions = image_versions(host)
    mismatch = compare_versions(versions["builder"], versions["triton"]) if all(
        re.fullmatch(r"[\d.]+", value) for value in versions.values()) else "unreadable"  # fmt: skip
    detail = f"builder image TensorRT {versions['builder']}, triton image TensorRT {versions['triton']}"
    if not report.add("TensorRT versions", [f"{detail}: {mismatch}"] if mismatch else [], detail):
        return report
    if not args.skip_build:
        builder = host.compose("run", "--rm", "builder")
        log = builder.stdout + builder.stderr
        problems = [f"exit {builder.returncode}: {log.strip()[-600:]}"] if builder.returncode else []
        if not report.add("library and engines", problems + builder_log_problems(log, versions["builder"]),
                          "library built, links and creators checked, engines written"):  # fmt: skip
            return report
    with tempfile.TemporaryDirectory() as directory:
        try:
            serve_and_compare(host, report, verbose_override(Path(directory)))
        finally:
            if not args.keep_running:
                host.compose("stop", "triton", timeout=300)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        report = run_check(args)
    except CannotRun as error:
        print(f"gpu-host-check: this host cannot run it: {error}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    print(report.summary())
    return EXIT_OK if report.summary().startswith("gpu-host-check: PASS") else EXIT_FAILED
