"""The perf report: one markdown file (tables), one JSON file (every row) and one plot.

Tables: throughput and client-side latency per model, protocol and concurrency; the server-side split per
model (queue, compute input, compute infer, compute output: Triton's statistics as perf_analyzer read them);
with --compare-edge a second table, edge on vs off. The plot (matplotlib, when installed: `pip install
'.[load]'`) shows throughput against p50 and p99 latency per model and protocol, and the server-side split.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from loadtests.perf.sweep import SERVER_PARTS, Row

PLOT_NAME = "perf.png"


def _ms(value_us: float | None) -> str:
    return "" if value_us is None else f"{value_us / 1000:.2f}"


def _rate(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}"


def throughput_table(rows: Iterable[Row]) -> list[str]:
    lines = [
        "| model | protocol | batch | concurrency | infer/s | requests/s | p50 ms | p99 ms | avg ms "
        "| errors |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        rate = row.values.get("infer_per_s")
        requests = None if rate is None else rate / row.batch
        lines.append(
            f"| {row.model} | {row.protocol} | {row.batch} | {row.concurrency} | {_rate(rate)} | "
            f"{_rate(requests)} | {_ms(row.values.get('p50_us'))} | {_ms(row.values.get('p99_us'))} | "
            f"{_ms(row.values.get('avg_us'))} | {0 if row.ok else row.error.replace('|', '/')} |"
        )
    return lines


def server_table(rows: Iterable[Row]) -> list[str]:
    """Server-side time per request (µs), at each model's and protocol's highest concurrency measured."""
    top: dict[tuple[str, str], Row] = {}
    for row in rows:
        if row.ok and row.concurrency >= top.get((row.model, row.protocol), row).concurrency:
            top[(row.model, row.protocol)] = row
    lines = [
        "| model | protocol | concurrency | queue µs | compute input µs | compute infer µs "
        "| compute output µs | client-side avg µs |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (model, protocol), row in top.items():
        parts = " | ".join(f"{row.values.get(part, 0):,.0f}" for part in SERVER_PARTS)
        lines.append(
            f"| {model} | {protocol} | {row.concurrency} | {parts} | {row.values.get('avg_us', 0):,.0f} |"
        )
        for name, split in row.composing.items():
            parts = " | ".join(f"{split.get(part, 0):,.0f}" for part in SERVER_PARTS)
            lines.append(
                f"| &nbsp;&nbsp;↳ {name} (in {model}) | {protocol} | {row.concurrency} | {parts} | |"
            )
    return lines


def edge_table(on: list[Row], off: list[Row]) -> list[str]:
    """Edge on vs off: the same runs against two servers, and the ratio of their throughputs."""
    by_key = {(r.model, r.protocol, r.concurrency): r for r in off}
    lines = [
        "| model | protocol | concurrency | infer/s edge on | infer/s edge off | on / off | p99 ms on | "
        "p99 ms off |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in on:
        other = by_key.get((row.model, row.protocol, row.concurrency))
        if other is None:
            continue
        a, b = row.values.get("infer_per_s"), other.values.get("infer_per_s")
        ratio = f"{a / b:.2f}" if a and b else ""
        lines.append(
            f"| {row.model} | {row.protocol} | {row.concurrency} | {_rate(a)} | {_rate(b)} | {ratio} | "
            f"{_ms(row.values.get('p99_us'))} | {_ms(other.values.get('p99_us'))} |"
        )
    return lines


def plot(rows: list[Row], path: Path) -> str | None:
    """Throughput vs p50/p99 per model and protocol, and the server-side split; None when matplotlib is not
    installed (the report says so)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return (
            "No plot: matplotlib is not installed here (the compose service's image has none). Draw it where "
            f"it is: `python -m loadtests.perf.report {path.parent}` (make venv has it)."
        )
    models = list(dict.fromkeys(row.model for row in rows))
    figure, axes = plt.subplots(2, len(models), figsize=(5 * len(models), 8), squeeze=False)
    for column, model in enumerate(models):
        axis = axes[0][column]
        for protocol in dict.fromkeys(row.protocol for row in rows):
            for target in dict.fromkeys(row.target for row in rows):
                ok = [
                    r for r in rows if (r.model, r.protocol, r.target) == (model, protocol, target) and r.ok
                ]
                if not ok:
                    continue
                x = [r.values["infer_per_s"] for r in ok]
                label = f"{protocol}{' ' + target if target else ''}"
                axis.plot(x, [r.values["p50_us"] / 1000 for r in ok], "o-", label=f"{label} p50")
                axis.plot(x, [r.values["p99_us"] / 1000 for r in ok], "x--", label=f"{label} p99")
        axis.set_title(f"{model} (batch {next(r.batch for r in rows if r.model == model)})")
        axis.set_xlabel("inferences/s")
        axis.set_ylabel("latency ms")
        axis.legend(fontsize=7)
        axis.grid(alpha=0.3)
        bars = axes[1][column]
        ok = [r for r in rows if r.model == model and r.ok and not r.target.endswith("off")]
        labels = [f"{r.protocol[0]}{r.concurrency}{'' if not r.target else ' ' + r.target[-3:]}" for r in ok]
        bottom = [0.0] * len(ok)
        for part in SERVER_PARTS:
            heights = [r.values.get(part, 0.0) / 1000 for r in ok]
            bars.bar(labels, heights, bottom=bottom, label=part.removesuffix("_us").replace("_", " "))
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        bars.set_title(f"{model}: server-side ms per request")
        bars.set_xlabel("protocol (g/h) + concurrency")
        bars.tick_params(axis="x", labelsize=7, rotation=60)
        bars.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return None


def write(out_dir: Path, header: list[str], rows: list[Row], edge_off: list[Row] | None = None) -> Path:
    """report.md, report.json and perf.png in out_dir; returns the markdown's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plot_note = plot(rows + (edge_off or []), out_dir / PLOT_NAME)
    lines = [*header, "", "## Throughput and latency (client side)", "", *throughput_table(rows), ""]
    lines += ["## Server-side time per request (Triton's statistics, highest concurrency)", ""]
    lines += [*server_table(rows), ""]
    if edge_off is not None:
        lines += ["## The edge's cost: edge on vs `--edge off`", "", *edge_table(rows, edge_off), ""]
        lines += ["Edge off, in full:", "", *throughput_table(edge_off), ""]
    lines += [plot_note or f"![throughput vs latency, server-side split]({PLOT_NAME})", ""]
    report = out_dir / "report.md"
    report.write_text("\n".join(lines))
    document = {
        "header": header,
        "rows": [r.to_json() for r in rows],
        "edge_off": None if edge_off is None else [r.to_json() for r in edge_off],
    }
    (out_dir / "report.json").write_text(json.dumps(document, indent=1) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    """`python -m loadtests.perf.report DIR`: report.md and perf.png again from DIR/report.json (e.g. for a
    report written where matplotlib was not installed)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__.split("\n")[0])
    parser.add_argument("report_dir", type=Path)
    args = parser.parse_args(argv)
    document = json.loads((args.report_dir / "report.json").read_text())
    rows = [Row(**row) for row in document["rows"]]
    edge_off = None if document["edge_off"] is None else [Row(**row) for row in document["edge_off"]]
    print(write(args.report_dir, document["header"], rows, edge_off))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
