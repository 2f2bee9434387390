"""`make model-analyzer` (`python -m loadtests.model_analyzer`): Triton Model Analyzer searches mnist's
serving configuration on the CPU and writes its recommendation and report.

NVIDIA's Model Analyzer (PyPI `triton-model-analyzer` 1.58.0, in .venv-model-analyzer: its pins would
downgrade the project's packages) in remote mode against a separate loopback tritonserver started here: the
CPU variant's binary and backends, the repository's own models, but explicit model control (Model Analyzer
loads each candidate configuration through the load API with the configuration as an override, which the kit's
hardened server refuses), on loopback ports of its own. perf_analyzer comes from where `make perf` takes it
(loadtests/perf/tool.py: native, or the Debian 13 root through chroot), behind a wrapper script that Model
Analyzer calls. CPU only: no DCGM, no GPU metrics (`cpu_only`, `dcgm_disable`).

The search (manual brute search, SEARCH below): instance count, max batch size, dynamic batching's queue delay
and preferred batch sizes, each at a few client concurrencies, requests of BATCH rows of the sample digits
(loadtests/perf/data.py); the shipped configuration (model_repository/mnist/configs/cpu.pbtxt) is measured in
the same run as Model Analyzer's "default". Written into --out: recommendation.md (shipped vs best, per
concurrency), Model Analyzer's metrics-model-inference.csv, its summary report, and the winner's config.pbtxt
where one beats the shipped configuration by more than 5 % and more than the noise at every concurrency.

    make model-analyzer                                       # the search below, about 15 minutes here
    .venv/bin/python -m loadtests.model_analyzer --tiny       # one candidate, one concurrency (the test's)
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from loadtests.perf import data as perf_data
from loadtests.perf import tool as perf_tool
from loadtests.perf.sweep import BATCH_SIZES
from trt_plugin_kit.interface import CPU_MODEL_CONFIG_NAME, MNIST, MODEL_REPOSITORY, REPO_ROOT
from trt_plugin_kit.serving.host import free_port
from trt_plugin_kit.serving.server import (
    METRICS_FLAGS,
    find_pytriton_distribution,
    prepare_cpu_backends,
)
from trt_plugin_kit.serving.server import cpu_environment as server_environment
from trt_plugin_kit.serving.shm_budget import python_backend_shm_flags

PROG = "python -m loadtests.model_analyzer"
MODEL_ANALYZER = REPO_ROOT / ".venv-model-analyzer" / "bin" / "model-analyzer"
MODEL_ANALYZER_VERSION = "1.58.0"
DEFAULT_OUT = REPO_ROOT / "records" / "model-analyzer"
SHIPPED_CONFIG = MODEL_REPOSITORY / MNIST / "configs" / f"{CPU_MODEL_CONFIG_NAME}.pbtxt"
BATCH = BATCH_SIZES[MNIST]  # rows per request, as make perf sends them
# Model Analyzer's manual search space (model_config_parameters) and client concurrencies.
SEARCH = {
    "max_batch_size": [64],
    "instance_group": [[{"kind": "KIND_CPU", "count": [1, 2]}]],
    "dynamic_batching": {
        "max_queue_delay_microseconds": [0, 500, 2000],
        "preferred_batch_size": [[16, 32, 64], [64]],
    },
}
CONCURRENCY = [2, 8]
TINY_SEARCH = {
    "max_batch_size": [64],
    "instance_group": [[{"kind": "KIND_CPU", "count": [1]}]],
    "dynamic_batching": {"max_queue_delay_microseconds": [0]},
}
TINY_CONCURRENCY = [2]
# A smoke test measures that it runs, not numbers that hold still: any spread between windows is accepted.
TINY_FLAGS = {"stability-percentage": 1000}
RESULTS_CSV = "metrics-model-inference.csv"
WINNER_CONFIG = "winner-config.pbtxt"
META = "run.json"  # the run's command, time, host and perf_analyzer, kept for --report-only
MIN_GAIN = 0.05  # a candidate must beat the shipped configuration by this much (and by more than the noise)


class LoopbackServer:
    """tritonserver (the CPU variant's binary and backends) on 127.0.0.1, explicit model control, no model
    loaded: Model Analyzer's remote-mode target. Nothing but this user's processes on loopback reach it."""

    def __init__(self, workdir: Path, log: Path) -> None:
        distribution = find_pytriton_distribution()
        backends = prepare_cpu_backends(distribution, workdir)
        env = server_environment(distribution, dict(os.environ))
        self.http, self.grpc, self.metrics = free_port(), free_port(), free_port()
        command = [
            str(distribution.tritonserver),
            f"--model-repository={MODEL_REPOSITORY}",
            f"--backend-directory={backends}",
            f"--cache-directory={distribution.root / 'caches'}",
            "--model-control-mode=explicit",
            "--strict-readiness=true",
            "--allow-metrics=true",
            "--allow-gpu-metrics=false",
            "--pinned-memory-pool-byte-size=0",
            "--cuda-memory-pool-byte-size=0:0",
            *METRICS_FLAGS,
            *(f"--{kind}-address=127.0.0.1" for kind in ("http", "grpc", "metrics")),
            f"--http-port={self.http}",
            f"--grpc-port={self.grpc}",
            f"--metrics-port={self.metrics}",
            f"--backend-config=python,shm-region-prefix-name=trt_plugin_kit_ma{os.getpid()}_",
            *python_backend_shm_flags(),
        ]
        self.log = log
        self.process = subprocess.Popen(
            command,
            env=env,
            cwd=workdir,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._wait_live()

    def _wait_live(self) -> None:
        import tritonclient.http as httpclient  # noqa: PLC0415 - the kit's client of Triton's HTTP API

        client = httpclient.InferenceServerClient(f"127.0.0.1:{self.http}", network_timeout=2)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"tritonserver exited {self.process.returncode}:\n{self.log.read_text()[-3000:]}"
                )
            try:
                if client.is_server_live():
                    client.close()
                    return
            except Exception:  # noqa: BLE001 - not listening yet: refused, reset or timed out
                pass
            time.sleep(0.5)
        client.close()
        self.stop()
        raise RuntimeError("tritonserver not live in 120 s:\n" + self.log.read_text()[-3000:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def perf_analyzer_wrapper(workdir: Path) -> tuple[Path, str]:
    """An executable Model Analyzer calls as perf_analyzer: `make perf`'s perf_analyzer (native or in the
    Debian 13 root), run in Model Analyzer's working directory (its CSV lands there)."""
    perf = perf_tool.find("auto")
    prefix = perf.command([], workdir)
    script = workdir / "perf_analyzer"
    quoted = " ".join(shlex.quote(part) for part in prefix)
    script.write_text(f'#!/bin/sh\n# {perf.describe()}\nexec {quoted} "$@"\n')
    script.chmod(0o755)
    return script, perf.describe()


def analyzer_repository(workdir: Path) -> Path:
    """Model Analyzer reads the model's default configuration from <repository>/mnist/config.pbtxt: the
    shipped CPU configuration (the server loads the model files from the real repository)."""
    repository = workdir / "repository"
    (repository / MNIST).mkdir(parents=True)
    shutil.copy(SHIPPED_CONFIG, repository / MNIST / "config.pbtxt")
    return repository


def analyzer_config(workdir: Path, server: LoopbackServer, wrapper: Path, tiny: bool) -> Path:
    data = perf_data.write_input_data(workdir / "data")[MNIST]
    config = {
        "model_repository": str(analyzer_repository(workdir)),
        "output_model_repository_path": str(workdir / "output_repository"),
        "override_output_model_repository": True,
        "checkpoint_directory": str(workdir / "checkpoints"),
        "export_path": str(workdir / "export"),
        "triton_launch_mode": "remote",
        "triton_http_endpoint": f"127.0.0.1:{server.http}",
        "triton_grpc_endpoint": f"127.0.0.1:{server.grpc}",
        "triton_metrics_url": f"http://127.0.0.1:{server.metrics}/metrics",
        "client_protocol": "grpc",
        "perf_analyzer_path": str(wrapper),
        "perf_analyzer_timeout": 300,
        "dcgm_disable": True,
        "collect_cpu_metrics": True,
        "run_config_search_disable": True,  # manual brute search: the space below, nothing else
        "batch_sizes": [BATCH],
        "profile_models": {
            MNIST: {
                "cpu_only": True,
                "model_config_parameters": TINY_SEARCH if tiny else SEARCH,
                "parameters": {"concurrency": TINY_CONCURRENCY if tiny else CONCURRENCY},
                "perf_analyzer_flags": {"input-data": str(data), **(TINY_FLAGS if tiny else {})},
            }
        },
    }
    path = workdir / "model-analyzer.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def read_results(export: Path) -> list[dict]:
    path = export / "results" / RESULTS_CSV
    if not path.is_file():
        return []
    with path.open() as handle:
        return [row for row in csv.DictReader(handle) if row.get("Model")]


def number(row: dict, *names: str) -> float:
    for name in names:
        if row.get(name) not in (None, ""):
            return float(row[name])
    raise KeyError(f"none of {names} in {sorted(row)}")


def throughput(row: dict) -> float:
    return number(row, "Throughput (infer/sec)")


def p99(row: dict) -> float:
    return number(row, "p99 Latency (ms)")


def batching(config: Path) -> str:
    """A configuration's dynamic batching in one phrase, read from its config.pbtxt."""
    text = config.read_text() if config.is_file() else ""
    if "dynamic_batching" not in text:
        return "off" if text else "?"
    delay = re.search(r"max_queue_delay_microseconds:\s*(\d+)", text)
    preferred = re.findall(r"preferred_batch_size:\s*\[?\s*([\d,\s]+)\]?", text)
    sizes = ",".join(part.strip() for item in preferred for part in item.split(",") if part.strip())
    return f"delay {delay[1] if delay else 0} µs, preferred {sizes or 'none'}"


def describe(row: dict, meta: dict) -> tuple[str, str, str]:
    """What makes a configuration: instances, max batch size, dynamic batching."""
    return (
        row.get("Instance Group", ""),
        row.get("Max Batch Size", ""),
        meta["batching"].get(row["Model Config Path"], "?"),
    )


def noise(group: list[dict], meta: dict) -> float:
    """The largest relative spread between measurements of the same configuration at one concurrency (the
    search space holds the shipped configuration again as a candidate: a control of the machine's noise)."""
    spread = 0.0
    for i, row in enumerate(group):
        for other in group[i + 1 :]:
            if describe(row, meta) == describe(other, meta):
                high, low = sorted((throughput(row), throughput(other)), reverse=True)
                spread = max(spread, high / low - 1)
    return spread


def recommendation(rows: list[dict], meta: dict) -> tuple[str, str | None]:
    """recommendation.md, and the variant that wins (None: the shipped configuration holds): one that beats
    the shipped configuration at every concurrency by more than MIN_GAIN and more than the noise."""
    by_concurrency: dict[int, list[dict]] = {}
    for row in rows:
        by_concurrency.setdefault(int(row["Concurrency"]), []).append(row)
    lines = [
        f"# Model Analyzer {MODEL_ANALYZER_VERSION}: mnist's serving configuration on the CPU",
        "",
        f"Command: `{meta['command']}`; {meta['when']}; host: {meta['host']}; perf_analyzer: {meta['perf']}.",
        f"Requests of {BATCH} digits, gRPC, against a loopback tritonserver (CPU variant, explicit model "
        "control). Throughput in inferences (rows) per second; latency: perf_analyzer's p99 per request. "
        "The shipped configuration is Model Analyzer's `mnist_config_default`; a candidate with the same "
        "settings is the control: the gap between the two is this machine's noise.",
        "",
        "| concurrency | configuration | instances | max batch | dynamic batching | inferences/s | p99 ms |",
        "|---:|---|---|---:|---|---:|---:|",
    ]
    wins: dict[str, int] = {}
    margins = []
    for concurrency, group in sorted(by_concurrency.items()):
        group.sort(key=throughput, reverse=True)
        default = next((r for r in group if r["Model Config Path"].endswith("config_default")), None)
        for row in group:
            mark = " (shipped)" if row is default else (" **best**" if row is group[0] else "")
            instances, max_batch, batching = describe(row, meta)
            lines.append(
                f"| {concurrency} | `{row['Model Config Path']}`{mark} | {instances} | {max_batch} | "
                f"{batching} | {throughput(row):,.1f} | {p99(row):,.2f} |"
            )
        margin = max(MIN_GAIN, noise(group, meta))
        margins.append(f"{100 * margin:.0f} % at concurrency {concurrency}")
        if (
            default is not None
            and group[0] is not default
            and throughput(group[0]) > (1 + margin) * throughput(default)
        ):
            wins[group[0]["Model Config Path"]] = wins.get(group[0]["Model Config Path"], 0) + 1
    winner = max(wins, key=wins.get) if wins and max(wins.values()) == len(by_concurrency) else None
    needed = ", ".join(margins)
    if winner:
        verdict = f"`{winner}` beats the shipped configuration at every concurrency by more than {needed}."
    else:
        verdict = (
            f"no configuration beats the shipped one at every concurrency by more than the gain required "
            f"({needed}: {100 * MIN_GAIN:.0f} %, or the noise where larger); the shipped configuration stays."
        )
    lines += ["", f"Verdict: {verdict}"]
    return "\n".join(lines) + "\n", winner


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(DEFAULT_OUT), help="where the recommendation and report go")
    p.add_argument("--tiny", action="store_true", help="one candidate at one concurrency (a smoke test)")
    p.add_argument("--model-analyzer", default=str(MODEL_ANALYZER), help="the model-analyzer executable")
    p.add_argument("--keep", action="store_true", help="keep the working directory (its path is printed)")
    p.add_argument(
        "--report-only", metavar="WORKDIR", help="measure nothing: write --out again from a kept run"
    )
    return p.parse_args(argv)


def collect(workdir: Path, out: Path, rows: list[dict], meta: dict) -> str | None:
    """recommendation.md, the CSV, the summary report and the winner's config.pbtxt into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    variants = {row["Model Config Path"] for row in rows}
    meta["batching"] = {
        name: batching(SHIPPED_CONFIG if name.endswith("config_default") else variant_config(workdir, name))
        for name in variants
    }
    text, winner = recommendation(rows, meta)
    (out / "recommendation.md").write_text(text)
    shutil.copy(workdir / "export" / "results" / RESULTS_CSV, out / RESULTS_CSV)
    for report in (workdir / "export" / "reports" / "summaries").glob(f"{MNIST}/result_summary.*"):
        shutil.copy(report, out / report.name)
    (out / WINNER_CONFIG).unlink(missing_ok=True)
    if winner:  # the configuration to ship, as Model Analyzer wrote it
        shutil.copy(variant_config(workdir, winner), out / WINNER_CONFIG)
    return winner


def variant_config(workdir: Path, variant: str) -> Path:
    return workdir / "output_repository" / variant / "config.pbtxt"


def report_only(workdir: Path, out: Path) -> int:
    """--report-only: the recommendation and report of a kept run (--keep) written again."""
    rows = read_results(workdir / "export")
    if not rows or not (workdir / META).is_file():
        print(f"{PROG}: {workdir} holds no finished run ({RESULTS_CSV}, {META})")
        return 1
    winner = collect(workdir, out, rows, json.loads((workdir / META).read_text()))
    print(f"{PROG}: {len(rows)} measurements; {out}/recommendation.md; winner: {winner or 'shipped'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report_only:
        return report_only(Path(args.report_only), Path(args.out))
    analyzer = Path(args.model_analyzer)
    if not analyzer.is_file():
        print(
            f"{PROG}: no {analyzer}: `make model-analyzer` installs "
            f"triton-model-analyzer=={MODEL_ANALYZER_VERSION}"
        )
        return 3
    workdir = Path(tempfile.mkdtemp(prefix="model-analyzer-"))
    server = None
    try:
        wrapper, perf = perf_analyzer_wrapper(workdir)
        server = LoopbackServer(workdir, workdir / "tritonserver.log")
        config = analyzer_config(workdir, server, wrapper, args.tiny)
        print(f"{PROG}: Model Analyzer {MODEL_ANALYZER_VERSION}, {perf}; work in {workdir}", flush=True)
        with (workdir / "model-analyzer.log").open("w") as log:
            done = subprocess.run([str(analyzer), "profile", "-f", str(config)], cwd=workdir, stdout=log,
                                  stderr=subprocess.STDOUT, timeout=3600)  # fmt: skip
        rows = read_results(workdir / "export")
        if done.returncode != 0 or not rows:
            tail = (workdir / "model-analyzer.log").read_text(errors="replace")[-4000:]
            print(f"{PROG}: model-analyzer exited {done.returncode} with {len(rows)} results:\n{tail}")
            return 1
        meta = {"command": " ".join([PROG, *(argv if argv is not None else sys.argv[1:])]),
                "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "host": f"{os.cpu_count()} cores",
                "perf": perf.replace(f"{REPO_ROOT}/", "")}  # fmt: skip
        (workdir / META).write_text(json.dumps(meta))
        winner = collect(workdir, Path(args.out), rows, meta)
        print(
            f"{PROG}: {len(rows)} measurements; {args.out}/recommendation.md; winner: {winner or 'shipped'}"
        )
        return 0
    except (perf_tool.ToolUnavailable, RuntimeError) as error:
        print(f"{PROG}: {error}")
        return 3
    finally:
        if server is not None:
            server.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
