"""``python -m trt_plugin_kit.deploy.dashboard``: the Grafana dashboard drawn as an operator would see it.

Grafana is not obtainable here (no Debian package, no wheel), so this draws deploy/monitoring/
triton-dashboard.json itself: every panel at its grid position with its title and unit, every target's query
run by a real Prometheus (Debian's ``prometheus``) over the time range, one line per series named by its
legend format, "No data" where Grafana would say so. The data: a CPU server started as ``make serve`` starts
it, under load from two clients with every fifth pipeline request failing, then stopped, down a few seconds,
and started again on its ports (Grafana's variables at "All"). One PNG sheet: a change to a query or the
layout shows up as a change to the picture (deploy/monitoring/README.md shows it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from trt_plugin_kit.deploy.kubernetes import DASHBOARD_FILE
from trt_plugin_kit.deploy.monitoring import (
    SCRAPE_INTERVAL_S,
    MonitoringError,
    Prometheus,
    Scraped,
)

PROG = "python -m trt_plugin_kit.deploy.dashboard"
DEFAULT_OUT = DASHBOARD_FILE.with_suffix(".png")
GRID_COLUMNS = 24  # Grafana's grid: 24 columns, rows of 30 px
ROW_PX = 30
SHEET_WIDTH_PX = 1800
DPI = 100
MAX_POINTS = 300  # points per series across the range (Grafana: about the panel's width in pixels)
LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")
GPU_METRIC = re.compile(r"\bnv_gpu_\w+|\bnv_energy_\w+")


def rate_interval(step_s: float, scrape_s: float = SCRAPE_INTERVAL_S) -> str:
    """Grafana's $__rate_interval: max($__interval + scrape interval, 4 x scrape interval)."""
    return f"{max(step_s + scrape_s, 4 * scrape_s):g}s"


def grafana_expr(expr: str, rate: str) -> str:
    """A target's PromQL as Grafana sends it with every variable at "All" (allValue ".+")."""
    return expr.replace("$__rate_interval", rate).replace("$model", ".+").replace("$instance", ".+")


def dashboard_targets(dashboard: dict | None = None) -> list[tuple[dict, dict]]:
    """(panel, target) of every query of the dashboard, in the JSON's order."""
    dashboard = dashboard or json.loads(DASHBOARD_FILE.read_text())
    return [(panel, target) for panel in dashboard["panels"] for target in panel.get("targets", [])]


def legend(form: str, labels: dict) -> str:
    return LEGEND.sub(lambda m: labels.get(m.group(1), ""), form).strip() or json.dumps(labels)


def fetch_panels(prometheus: Prometheus, dashboard: dict, start: float, end: float) -> dict:
    """Every panel's series over [start, end]: {panel id: [(legend, [t...], [v...]), ...]}, and the query
    parameters used."""
    step = max(1.0, math.ceil((end - start) / MAX_POINTS))
    rate = rate_interval(step)
    series: dict[int, list] = {}
    for panel, target in dashboard_targets(dashboard):
        result = prometheus.query_range(grafana_expr(target["expr"], rate), start, end, step)
        for item in result:
            times = [float(t) for t, _ in item["values"]]
            values = [float(v) for _, v in item["values"]]
            series.setdefault(panel["id"], []).append(
                (legend(target.get("legendFormat", ""), item["metric"]), times, values)
            )
    return {"series": series, "step_s": step, "rate_interval": rate, "start": start, "end": end}


def with_gaps(times: list[float], values: list[float], step: float) -> tuple[list, list[float]]:
    """Times as datetimes, with a NaN wherever samples are missing (a server down): Grafana's time series
    do not join over gaps (spanNulls off), and neither does this drawing."""
    stamps, out = [], []
    for i, (t, v) in enumerate(zip(times, values, strict=True)):
        if i and t - times[i - 1] > 1.5 * step:
            stamps.append(datetime.datetime.fromtimestamp((t + times[i - 1]) / 2, datetime.UTC))
            out.append(math.nan)
        stamps.append(datetime.datetime.fromtimestamp(t, datetime.UTC))
        out.append(v)
    return stamps, out


UNITS = {  # Grafana unit id -> (axis suffix, scale)
    "reqps": ("req/s", 1.0),
    "µs": ("µs", 1.0),
    "short": ("", 1.0),
    "percentunit": ("%", 100.0),
    "bytes": ("MiB", 1 / 2**20),
    "watt": ("W", 1.0),
}


def draw(dashboard: dict, fetched: dict, out: Path, scenario: str) -> dict[str, int]:
    """The sheet; returns the number of series drawn per panel title."""
    import matplotlib  # noqa: PLC0415 - drawing only

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    panels = dashboard["panels"]
    grid_rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    header_px, footer_px = 90, 50
    height_px = grid_rows * ROW_PX + header_px + footer_px
    fig = plt.figure(figsize=(SHEET_WIDTH_PX / DPI, height_px / DPI), dpi=DPI)
    start = datetime.datetime.fromtimestamp(fetched["start"], datetime.UTC)
    end = datetime.datetime.fromtimestamp(fetched["end"], datetime.UTC)
    variables = ", ".join(
        f"{v['label']} = All" for v in dashboard["templating"]["list"] if v["type"] == "query"
    )
    fig.text(0.01, 1 - 30 / height_px, dashboard["title"], fontsize=18, weight="bold", va="center")
    fig.text(
        0.01,
        1 - 62 / height_px,
        f"{start:%Y-%m-%d %H:%M:%S} to {end:%H:%M:%S} UTC ({(end - start).total_seconds() / 60:.1f} min), "
        f"step {fetched['step_s']:g} s, $__rate_interval {fetched['rate_interval']}; {variables}",
        fontsize=11,
        va="center",
        color="#444",
    )
    footer = textwrap.fill(scenario, 230)
    fig.text(0.01, footer_px / 2 / height_px, footer, fontsize=9, va="center", color="#444")
    drawn: dict[str, int] = {}
    for panel in panels:
        g = panel["gridPos"]
        left, width = g["x"] / GRID_COLUMNS, g["w"] / GRID_COLUMNS
        top_px = header_px + g["y"] * ROW_PX
        if panel["type"] == "row":
            fig.text(left + 0.005, 1 - (top_px + ROW_PX / 2) / height_px, panel["title"], fontsize=13,
                     weight="bold", va="center")  # fmt: skip
            continue
        lines = fetched["series"].get(panel["id"], [])
        drawn[panel["title"]] = len(lines)
        frame = (left, width, top_px, g["h"] * ROW_PX, height_px)
        draw_panel(fig, panel, lines, frame, (start, end, fetched["step_s"]))
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    return drawn


LEGEND_ROW_PX = 12


def draw_panel(fig, panel: dict, lines: list, frame: tuple, span: tuple) -> None:
    """One time series panel: title, unit, one line per series, its legend where the JSON puts it (bottom: a
    list under the plot, as many entries a row as fit), "No data" as Grafana says it."""
    import matplotlib.dates as mdates  # noqa: PLC0415

    left, width, top_px, panel_px, height_px = frame
    start, end, step = span
    options = panel.get("options", {}).get("legend", {})
    columns = max(2, round(width * GRID_COLUMNS / 2))
    legend_px = 0
    if lines and options.get("showLegend", True) and options.get("placement", "bottom") == "bottom":
        legend_px = math.ceil(len(lines) / columns) * LEGEND_ROW_PX + 24
    box = [left + 0.035, 1 - (top_px + panel_px - 24 - legend_px) / height_px, width - 0.045,
           (panel_px - 58 - legend_px) / height_px]  # fmt: skip
    ax = fig.add_axes(box)
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
    suffix, scale = UNITS.get(unit, (unit, 1.0))
    ax.set_title(panel["title"], fontsize=11, loc="left", weight="bold")
    if len(lines) > 10:  # the default cycle has 10 colours: a panel of more would repeat them
        import matplotlib  # noqa: PLC0415

        ax.set_prop_cycle(color=matplotlib.colormaps["tab20"].colors)
    for name, times, values in sorted(lines, key=lambda s: s[0]):
        stamps, scaled = with_gaps(times, [v * scale for v in values], step)
        ax.plot(stamps, scaled, linewidth=1.3, label=name)
    ax.set_xlim(start, end)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=datetime.UTC))
    ax.tick_params(labelsize=8)
    ax.set_ylabel(suffix, fontsize=8)
    ax.grid(alpha=0.3)
    if legend_px:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(box[0], box[1] - 20 / height_px),
                  bbox_transform=fig.transFigure, ncol=columns, frameon=False, handlelength=1.2,
                  columnspacing=1.0, borderaxespad=0)  # fmt: skip
    elif lines and options.get("showLegend", True):
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)  # placement right
    elif not lines:
        ax.text(0.5, 0.5, "No data", transform=ax.transAxes, ha="center", va="center", color="#888")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(DEFAULT_OUT), help="the PNG (default: beside the dashboard's JSON)")
    p.add_argument("--load-s", type=float, default=60, help="seconds of load before the restart (default 60)")
    p.add_argument("--down-s", type=float, default=5, help="seconds the server stays down (default 5)")
    p.add_argument("--after-s", type=float, default=40, help="seconds of load after the restart (default 40)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("prometheus") is None:
        print(f"{PROG}: no prometheus binary: apt-get install prometheus (Debian's package)")
        return 2
    dashboard = json.loads(DASHBOARD_FILE.read_text())
    with tempfile.TemporaryDirectory(prefix="dashboard-") as tmp:
        state = Scraped(Path(tmp))
        try:
            start = time.time()
            time.sleep(args.load_s)
            state.stop_load()
            restart = time.time()
            state.restart_server(down_s=args.down_s)
            state.start_load()
            time.sleep(args.after_s)
            state.stop_load()
            end = time.time()
            fetched = fetch_panels(state.prometheus, dashboard, start, end)
        except MonitoringError as error:
            print(f"{PROG}: {error}")
            return 1
        finally:
            state.close()
    at = datetime.datetime.fromtimestamp(restart, datetime.UTC)
    scenario = (
        f"Scenario ({PROG}): one CPU server as `make serve` starts it, scraped every {SCRAPE_INTERVAL_S} s; "
        f"2 clients, every model, every fifth mnist_pipeline request not a picture (BACKEND failures); "
        f"server stopped at {at:%H:%M:%S}, down {args.down_s:g} s, started again on its ports. "
        "No GPU here: the GPU row has no data."
    )
    drawn = draw(dashboard, fetched, Path(args.out), scenario)
    empty = [title for title, count in drawn.items() if count == 0]
    print(f"{PROG}: {len(drawn)} panels, {sum(drawn.values())} series -> {args.out}")
    print("panels without data: " + (", ".join(empty) or "none"))
    gpu = {p["title"] for p, t in dashboard_targets(dashboard) if GPU_METRIC.search(t["expr"])}
    return 1 if set(empty) - gpu else 0


if __name__ == "__main__":
    sys.exit(main())
