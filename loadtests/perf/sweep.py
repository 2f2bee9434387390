"""One perf_analyzer run per model, protocol and concurrency, its CSV (`-f`, `--verbose-csv`) read back.

Every run asks for the same requests the load test sends (loadtests/options.py's defaults: `mnist` 8 digits,
`mnist_pipeline` 1 PNG, `l2norm` 4 vectors of 128), from the input data of loadtests/perf/data.py. A run that
fails (perf_analyzer stops at a failed request, or no stable measurement) is a row with its error, not a
crash: the report shows every model and protocol either way.
"""

from __future__ import annotations

import csv
import re
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from loadtests.perf.tool import PerfAnalyzer
from trt_plugin_kit.interface import ADMIN_HEADER, GRPC_ADMIN_HEADER, L2NORM, MNIST, MNIST_PIPELINE, MNIST_VIT
from trt_plugin_kit.tritonserver.options import ServerLocation
from trt_plugin_kit.tritonserver.protocol import (
    REGION_RELEASE_WAIT_S,
    REGION_RETRY_S,
    client_module,
    region_in_use,
)

# Samples per request, as the load test sends them (its --batch-size, --l2norm-batch; the pipeline takes one).
BATCH_SIZES = {MNIST: 8, MNIST_PIPELINE: 1, L2NORM: 4, MNIST_VIT: 8}
# perf_analyzer's CSV columns (microseconds, averages over the measurement) -> our names.
CSV_COLUMNS = {
    "Inferences/Second": "infer_per_s",
    "Client Send": "client_send_us",
    "Network+Server Send/Recv": "network_us",
    "Server Queue": "queue_us",
    "Server Compute Input": "compute_input_us",
    "Server Compute Infer": "compute_infer_us",
    "Server Compute Output": "compute_output_us",
    "Client Recv": "client_recv_us",
    "p50 latency": "p50_us",
    "p90 latency": "p90_us",
    "p95 latency": "p95_us",
    "p99 latency": "p99_us",
    "Avg latency": "avg_us",
}
SERVER_PARTS = ("queue_us", "compute_input_us", "compute_infer_us", "compute_output_us")
# The CSV holds an ensemble's totals only; its composing models' split is in perf_analyzer's console output:
#   mnist, version: 1 ... Avg request latency: 2072 usec (overhead 2 usec + queue 1143 usec + compute input 18
#   usec + compute infer 788 usec + compute output 120 usec)
COMPOSING_MODEL = re.compile(r"^\s+(\S+), version: \S+\s*$")
SPLIT = re.compile(
    r"queue (\d+) usec \+ compute input (\d+) usec \+ compute infer (\d+) usec \+ compute output (\d+) usec"
)


@dataclass
class SweepSettings:
    concurrency: tuple[int, ...] = (1, 2, 4, 8)
    measurement_ms: int = 2000
    stability_percent: int = 50  # a busy shared machine swings; perf_analyzer's 10 % rarely settles there
    max_trials: int = 10
    shared_memory: str = "none"  # or "system": tensors through /dev/shm regions (restricted API: admin key)
    admin_key: str | None = None
    timeout_s: float = 180.0
    # Items per request per model: the kit's as the load test sends them; a model of yours --model-batch.
    batches: dict[str, int] = field(default_factory=lambda: dict(BATCH_SIZES))


@dataclass
class Row:
    """One measurement (model, protocol, concurrency), or why there is none (`error`)."""

    model: str
    protocol: str
    concurrency: int
    batch: int
    target: str = ""  # which server, when a run measures more than one (edge on / edge off)
    error: str = ""
    values: dict[str, float] = field(default_factory=dict)
    composing: dict[str, dict[str, float]] = field(default_factory=dict)  # ensemble: its models' split

    @property
    def ok(self) -> bool:
        return not self.error

    def to_json(self) -> dict:
        return asdict(self)


def perf_arguments(
    model: str, protocol: str, concurrency: int, location: ServerLocation, data: Path, csv_file: Path,
    settings: SweepSettings,
) -> list[str]:  # fmt: skip
    args = [
        "-m", model, "-u", location.address(protocol), "-i", protocol, "-b", str(settings.batches[model]),
        "--input-data", str(data), "--concurrency-range", f"{concurrency}:{concurrency}",
        "--measurement-interval", str(settings.measurement_ms), "--stability-percentage",
        str(settings.stability_percent), "--max-trials", str(settings.max_trials),
        "-f", str(csv_file), "--verbose-csv",
    ]  # fmt: skip
    if settings.shared_memory != "none":
        args += ["--shared-memory", settings.shared_memory]
        if settings.admin_key:
            # Registering regions is a restricted API: the edge wants the key (gRPC: in the prefixed header).
            header = ADMIN_HEADER if protocol == "http" else GRPC_ADMIN_HEADER
            args += ["-H", f"{header}:{settings.admin_key}"]
    return args


def read_csv(path: Path) -> dict[str, float]:
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        raise ValueError(f"{path} has no measurement row")
    values = {}
    for column, name in CSV_COLUMNS.items():
        if column in rows[-1] and rows[-1][column] not in ("", None):
            values[name] = float(rows[-1][column])
    return values


def composing_split(output: str) -> dict[str, dict[str, float]]:
    """{composing model: its server-side split in µs} from perf_analyzer's console output (ensembles)."""
    split, model = {}, None
    for line in output.partition("Composing models:")[2].splitlines():
        named = COMPOSING_MODEL.match(line)
        if named:
            model = named.group(1)
            continue
        found = SPLIT.search(line)
        if model and found:
            split[model] = dict(zip(SERVER_PARTS, map(float, found.groups()), strict=True))
            model = None
    return split


def last_error(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        if "error" in line.lower() or "failed" in line.lower():
            return line[:300]
    return lines[-1][:300] if lines else "no output"


def measure(
    tool: PerfAnalyzer, model: str, protocol: str, concurrency: int, location: ServerLocation,
    data: Path, workdir: Path, settings: SweepSettings, target: str = "",
) -> Row:  # fmt: skip
    """One perf_analyzer run; its console output is kept beside the CSV."""
    stem = f"{target.replace(' ', '-') + '-' if target else ''}{model}-{protocol}-c{concurrency}"
    csv_file, log = workdir / f"{stem}.csv", workdir / f"{stem}.log"
    csv_file.unlink(missing_ok=True)
    row = Row(model, protocol, concurrency, settings.batches[model], target)
    command = tool.command(
        perf_arguments(model, protocol, concurrency, location, data, csv_file, settings), workdir
    )
    started = time.monotonic()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=settings.timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        row.error = f"perf_analyzer did not finish within {settings.timeout_s:.0f} s"
        done = None
    if done is not None:
        log.write_text(f"$ {' '.join(command)}\n{done.stdout}\n{done.stderr}")
    if settings.shared_memory == "system":
        try:
            if left := release_regions(model, location, settings):
                with log.open("a") as handle:
                    handle.write(f"\nstill registered after the run, unregistered by make perf: {left}\n")
        except Exception as error:  # noqa: BLE001 - the server went away, or a region is held for good
            row.error = row.error or f"after the run: {error}"
    if done is None or row.error:
        return row
    if done.returncode != 0 or not csv_file.is_file():
        row.error = f"exit {done.returncode}: {last_error(done.stdout + done.stderr)}"
        return row
    try:
        row.values = read_csv(csv_file)
        row.composing = composing_split(done.stdout)
    except (ValueError, OSError) as error:
        row.error = str(error)
    print(
        f"  {target + ' ' if target else ''}{model} {protocol} c{concurrency}: "
        f"{row.values.get('infer_per_s', 0):,.0f} infer/s, p99 {row.values.get('p99_us', 0) / 1000:.1f} ms "
        f"({time.monotonic() - started:.0f} s)",
        flush=True,
    )
    return row


def perf_region_names(metadata: dict) -> re.Pattern:
    """The names perf_analyzer gives a model's system shared memory regions: each output its name, each input
    `NAME_STREAM_STEP` (slashes dropped, as perf_analyzer does)."""

    def region(tensor: dict) -> str:
        return re.escape(tensor["name"].replace("/", "").replace("\\", ""))

    inputs = [region(tensor) for tensor in metadata.get("inputs", [])]
    outputs = [region(tensor) for tensor in metadata.get("outputs", [])]
    alternatives = [rf"(?:{'|'.join(inputs)})_\d+_\d+"] if inputs else []
    return re.compile("|".join(alternatives + outputs) or r"(?!)")


def release_regions(model: str, location: ServerLocation, settings: SweepSettings) -> list[str]:
    """perf_analyzer's regions of `model` still registered after its run, unregistered; returns their names.

    perf_analyzer unregisters every region as it ends, but Triton refuses a region that a request still holds
    ("... it is currently in use"): the release of the last requests can trail their answers, and on a busy
    machine a run's regions stayed registered on the server for good. Asked again shortly after, Triton
    unregisters them. Raises RuntimeError if one is still held after REGION_RELEASE_WAIT_S."""
    module = client_module("http")
    headers = {ADMIN_HEADER: settings.admin_key} if settings.admin_key else None
    client = module.InferenceServerClient(location.address("http"), connection_timeout=10, network_timeout=10)
    try:
        names = perf_region_names(client.get_model_metadata(model))
        status = client.get_system_shared_memory_status(headers=headers)
        left = [region["name"] for region in status if names.fullmatch(region["name"])]
        deadline = time.monotonic() + REGION_RELEASE_WAIT_S
        for name in left:
            while True:
                try:
                    client.unregister_system_shared_memory(name, headers=headers)
                    break
                except Exception as error:  # noqa: BLE001 - InferenceServerException, or any transport error
                    if not region_in_use(error) or time.monotonic() >= deadline:
                        raise RuntimeError(f"region '{name}' left registered: {error}") from None
                time.sleep(REGION_RETRY_S)
        return left
    finally:
        client.close()


def sweep(
    tool: PerfAnalyzer, models: tuple[str, ...], protocols: tuple[str, ...], location: ServerLocation,
    data: dict[str, Path], workdir: Path, settings: SweepSettings, target: str = "",
) -> list[Row]:  # fmt: skip
    rows = []
    for model in models:
        for protocol in protocols:
            for concurrency in settings.concurrency:
                row = measure(
                    tool, model, protocol, concurrency, location, data[model], workdir, settings, target
                )
                if row.error:
                    print(f"  {model} {protocol} c{concurrency}: FAILED {row.error}", flush=True)
                rows.append(row)
    return rows
