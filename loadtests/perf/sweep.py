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
from trt_plugin_kit.interface import ADMIN_HEADER, GRPC_ADMIN_HEADER, L2NORM, MNIST, MNIST_PIPELINE
from trt_plugin_kit.triton.options import ServerLocation

# Samples per request, as the load test sends them (its --batch-size, --l2norm-batch; the pipeline takes one).
BATCH_SIZES = {MNIST: 8, MNIST_PIPELINE: 1, L2NORM: 4}
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
        "-m", model, "-u", location.address(protocol), "-i", protocol, "-b", str(BATCH_SIZES[model]),
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
    row = Row(model, protocol, concurrency, BATCH_SIZES[model], target)
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
        return row
    log.write_text(f"$ {' '.join(command)}\n{done.stdout}\n{done.stderr}")
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
