"""`make perf` (`python -m loadtests.perf`): NVIDIA's perf_analyzer against the running server, every model,
both protocols, a concurrency sweep, one report. See loadtests/README.md, "perf_analyzer".

    make serve                                  # one terminal
    make perf                                   # another: reports/perf-<UTC time>/report.md + perf.png
    make perf PERF_ARGS="--concurrency 1,4 --protocol grpc --models mnist"
    make perf PERF_ARGS="--models my_model"     # any served model: data from its metadata, or --model-data
    make perf PERF_ARGS="--compare-edge"        # starts two CPU servers itself: edge on vs --edge off

Exit status: 0 when every run measured without an error, 1 when one failed (its row says why), 2 for bad
options, 3 when perf_analyzer cannot run here or no server answers (the message says why).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from loadtests.perf import data as perf_data
from loadtests.perf import report, tool
from loadtests.perf.sweep import SweepSettings, sweep
from trt_plugin_kit.interface import PROTOCOLS, REPO_ROOT
from trt_plugin_kit.tritonserver import options as cli
from trt_plugin_kit.tritonserver.options import ServerLocation
from trt_plugin_kit.tritonserver.protocol import ModelsNotServed, NotReady, wait_until_ready

try:
    from loadtests import any_model
except ImportError:  # the compose perf image (no tritonclient): the kit's models only
    any_model = None


def int_list(text: str) -> tuple[int, ...]:
    values = tuple(cli.positive_int(part) for part in str(text).split(",") if part.strip())
    if not values:
        raise ValueError("expected numbers such as 1,2,4,8")
    return values


def name_list(allowed: tuple[str, ...], what: str):
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(part.strip() for part in str(text).split(",") if part.strip())
        unknown = [name for name in names if name not in allowed]
        if unknown or not names:
            raise ValueError(
                f"unknown {what} {', '.join(unknown) or '(none)'}; choose from {', '.join(allowed)}"
            )
        return names

    parse.__name__ = what
    return parse


def model_list(text: str) -> tuple[str, ...]:
    """The kit's models and any other model name (a model of the server, checked there)."""
    names = tuple(part.strip() for part in str(text).split(",") if part.strip())
    if not names:
        raise ValueError("expected model names such as mnist,l2norm")
    for name in names:
        if name not in perf_data.PERF_MODELS and any_model is None:
            raise ValueError(
                f"{name}: this image measures the kit's models only ({', '.join(perf_data.PERF_MODELS)})"
            )
        if name not in perf_data.PERF_MODELS and not any_model.MODEL_NAME.match(name):
            raise ValueError(f"{name!r} is not a model name")
    return names


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m loadtests.perf",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cli.add_server_location_arguments(parser)
    group = parser.add_argument_group("what perf_analyzer measures")
    add = cli.add_env_argument
    add(
        group,
        "--protocol",
        variable="PERF_PROTOCOLS",
        default=("http", "grpc"),
        convert=name_list(PROTOCOLS, "protocol"),
        metavar="LIST",
        help="protocols, one run each",
    )
    add(
        group,
        "--models",
        variable="PERF_MODELS",
        default=perf_data.PERF_MODELS,
        convert=model_list,
        metavar="LIST",
        help="models, one run each: the kit's, or any the server serves (data from its metadata: "
        "--model-range, --model-dim; or --model-data NAME=FILE; items per request --model-batch)",
    )
    add(
        group,
        "--concurrency",
        variable="PERF_CONCURRENCY",
        default=SweepSettings.concurrency,
        convert=int_list,
        metavar="LIST",
        help="concurrent requests perf_analyzer keeps in flight, one run each",
    )
    add(
        group,
        "--measurement-ms",
        variable="PERF_MEASUREMENT_MS",
        default=SweepSettings.measurement_ms,
        convert=cli.positive_int,
        metavar="MS",
        help="perf_analyzer's --measurement-interval",
    )
    add(
        group,
        "--stability-percent",
        variable="PERF_STABILITY_PERCENT",
        default=SweepSettings.stability_percent,
        convert=cli.positive_int,
        metavar="P",
        help="perf_analyzer's --stability-percentage",
    )
    group.add_argument(
        "--shared-memory",
        choices=("none", "system"),
        default=os.environ.get("PERF_SHARED_MEMORY", "none"),
        help="system: tensors through /dev/shm regions registered with the server (a restricted API: give "
        "--admin-key; the server must share this host's /dev/shm) (default: none; $PERF_SHARED_MEMORY)",
    )
    cli.add_admin_key_argument(group)
    if any_model is not None:
        any_model.add_arguments(
            parser.add_argument_group("a model of yours (as the load test's --mix NAME=1)"), cli
        )
    group = parser.add_argument_group("how and where")
    group.add_argument(
        "--tool",
        choices=tool.MODES,
        default=os.environ.get("PERF_TOOL", "auto"),
        help="how perf_analyzer runs: native (glibc >= 2.38), chroot (a Debian 13 root, as root), docker "
        "(its image) or auto, the first that works in that order (default: auto; $PERF_TOOL)",
    )
    group.add_argument(
        "--reports-dir",
        type=Path,
        default=os.environ.get("PERF_REPORTS_DIR"),
        help="folder for report.md, report.json, perf.png and perf_analyzer's CSV and logs "
        "(default: reports/perf-<UTC time>; $PERF_REPORTS_DIR)",
    )
    group.add_argument(
        "--compare-edge",
        action="store_true",
        help="instead of the running server: start two CPU servers (edge on, and --edge off, as "
        "scripts/bench_edge.py does) and measure both alike; the report's second table is the edge's cost",
    )
    group.add_argument(
        "--prepare-only",
        action="store_true",
        help="make what perf_analyzer needs (the Debian 13 root, or with --tool docker its image) and stop",
    )
    return parser.parse_args(cli.join_negative_values(sys.argv[1:] if argv is None else argv))


def commit() -> str:
    """The checkout's commit (with '+' when it has changes), or '?' outside a git checkout (compose image)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "diff", "--quiet", "HEAD"], capture_output=True)
    except OSError:
        return "?"
    return head.stdout.strip() + ("+" if dirty.returncode else "") if head.returncode == 0 else "?"


def machine() -> str:
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "?")
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{platform.machine()} {model}, {os.cpu_count()} cores, load average {load} at the start"


def run(args: argparse.Namespace) -> int:
    try:
        perf = tool.find(args.tool)
    except tool.ToolUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 3
    print(f"using {perf.describe()}", flush=True)
    if args.prepare_only:
        return 0
    started = datetime.now(timezone.utc)
    out_dir = (args.reports_dir or REPO_ROOT / "reports" / f"perf-{started:%Y%m%dT%H%M%SZ}").resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = SweepSettings(
        concurrency=args.concurrency,
        measurement_ms=args.measurement_ms,
        stability_percent=args.stability_percent,
        shared_memory=args.shared_memory,
        admin_key=args.admin_key,
    )
    header = [
        f"# perf_analyzer report, {started:%Y-%m-%d %H:%M} UTC",
        "",
        f"- tool: {perf.describe()}",
        f"- machine: {machine()}",
        f"- commit: {commit()}",
        "- requests: batch {batches}; input data {sources}",
        f"- sweep: concurrency {','.join(map(str, args.concurrency))}, measurement window "
        f"{args.measurement_ms} ms, stability {args.stability_percent} %, shared memory {args.shared_memory}",
    ]
    edge_off = None
    if args.compare_edge:
        try:
            rows, edge_off = _compare_edge(perf, args, out_dir, settings)
        except ValueError as problem:  # ModelDataError of a model of yours
            print(f"error: {problem}", file=sys.stderr)
            return 2
        from trt_plugin_kit.serving.edge.native_front import native_binary

        front = f"native ({native_binary()})" if native_binary() else "Python (no make edge-native build)"
        header.append(
            "- servers: two CPU servers started for this run (edge on, `make serve`; and `--edge off`), "
            f"measured in turn, model by model; the edge's gRPC front: {front}"
        )
    else:
        location = ServerLocation.from_args(args)
        if importlib.util.find_spec("tritonclient") is None:
            # The compose service's image (Debian's Python, no tritonclient): compose starts it only once the
            # server's healthcheck says ready; a server gone later fails perf_analyzer's runs, each saying so.
            print("readiness not checked here (no tritonclient): compose's healthcheck did", flush=True)
        else:
            try:  # the kit's one readiness check: both protocols and every model swept
                wait_until_ready(location, models=args.models, timeout_s=5)
            except NotReady as problem:
                hint = "" if isinstance(problem, ModelsNotServed) else "; start one with `make serve`"
                print(f"error: {problem}{hint}", file=sys.stderr)
                return 3
        header.append(f"- server: {location.describe()}")
        try:
            input_data = write_input_data(args, location, out_dir, settings)
        except ValueError as problem:  # ModelDataError: the model's data does not fit (the message says why)
            print(f"error: {problem}", file=sys.stderr)
            return 2
        rows = sweep(perf, args.models, args.protocol, location, input_data, out_dir, settings)
    kits = [m for m in args.models if m in perf_data.PERF_MODELS]
    yours = [m for m in args.models if m not in perf_data.PERF_MODELS]
    sources = [f"{', '.join(kits)}: from samples/digits/ and seeded vectors" if kits else ""]
    sources += [f"{', '.join(yours)}: from the server's metadata or --model-data" if yours else ""]
    requests = next(n for n, line in enumerate(header) if line.startswith("- requests"))
    header[requests] = header[requests].format(
        batches=", ".join(f"{m} {settings.batches[m]}" for m in args.models),
        sources="; ".join(filter(None, sources)) + " (loadtests/perf/data.py)",
    )
    path = report.write(out_dir, header, rows, edge_off)
    failed = [row for row in rows + (edge_off or []) if not row.ok]
    print(f"report: {path}" + (f" ({len(failed)} runs FAILED)" if failed else ""), flush=True)
    return 1 if failed else 0


def write_input_data(
    args, location: ServerLocation, out_dir: Path, settings: SweepSettings
) -> dict[str, Path]:
    """perf_analyzer's input data for every model swept, in out_dir/input-data: the kit's from the repository,
    a model of yours from what the server reports about it, as the load test's `--mix NAME=1` builds it
    (its batch into settings.batches)."""
    others = {}
    for model in (m for m in args.models if m not in perf_data.PERF_MODELS):
        from trt_plugin_kit.tritonserver.protocol import client_module  # noqa: PLC0415 - needs tritonclient

        options = any_model.options_from_args(args)
        client = client_module("http").InferenceServerClient(location.address("http"))
        try:
            io = any_model.fetch_model_io(client, "http", model)
        finally:
            client.close()
        task = any_model.ModelTask(model, options)
        task.prepare(io)  # the load test's checks: batch within max_batch_size, the file fits the model
        others[model] = perf_data.any_model_data(io, task.pool)
        settings.batches[model] = task.batch
    return perf_data.write_input_data(out_dir / "input-data", others=others)


def _compare_edge(perf, args, out_dir, settings):
    """The sweep against a server with the edge and one without, model by model, in turn (machine load
    hits both alike)."""
    from trt_plugin_kit.serving.host import Ports
    from trt_plugin_kit.serving.server import TritonServer

    on_rows, off_rows = [], []
    with (
        TritonServer(
            variant="cpu", ports=Ports.free(), exit_timeout_s=3, log_file=out_dir / "edge-on.log"
        ) as on,
        TritonServer(
            variant="cpu", ports=Ports.free(), exit_timeout_s=3, edge="off", log_file=out_dir / "edge-off.log"
        ) as off,
    ):
        input_data = write_input_data(args, on.location, out_dir, settings)
        for model in args.models:
            for protocol in args.protocol:
                for rows, server, target in ((on_rows, on, "edge on"), (off_rows, off, "edge off")):
                    location = server.location
                    rows += sweep(
                        perf, (model,), (protocol,), location, input_data, out_dir, settings, target
                    )
    return on_rows, off_rows


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(argv))
