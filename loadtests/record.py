"""The one record format of the load-test measurements (baseline, queue signal, failover, soak; a
perf_analyzer study can use it too): what was run, where, when, and the figures, written by one helper.

A record is two files with one stem: NAME.json (`schema`, `study`, `command`, `when`, `where`, `figures`) and
NAME.md, the study's page, which starts with the same facts (`Record.head_lines`). Committed records live in
records/<study>/ (records/README.md); `default_output` names the next one there.

    record = Record.begin("baseline", "python -m loadtests.baseline", argv, server="cpu variant ...")
    ...                                     # measure
    record.figures = {...}                  # what came out, JSON-serializable
    write_record(record, path, page_lines)  # path.json + path.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from trt_plugin_kit.interface import REPO_ROOT

RECORD_SCHEMA = 1
RECORDS_DIR = REPO_ROOT / "records"
# Packages whose version changes what a load test measures (the load generator and its client).
MEASURING_PACKAGES = ("locust", "tritonclient")


def default_output(study: str, suffix: str = ".md") -> Path:
    """records/<study>/<study>-<YYYYMMDD><suffix>: where a study's record goes unless told otherwise."""
    return RECORDS_DIR / study / f"{study}-{datetime.now(timezone.utc):%Y%m%d}{suffix}"


def add_output_argument(parser: argparse.ArgumentParser, study: str) -> None:
    """--output, where a study writes its record (the page; its .json and chart beside it)."""
    parser.add_argument(
        "--output",
        type=Path,
        default=default_output(study),
        metavar="PAGE.md",
        help=f"the record's page; its .json (and chart) beside it (records/{study}/{study}-<UTC date>.md)",
    )


def machine_description() -> dict[str, str]:
    """The measuring machine: CPU model, cores, memory, OS, Python and the measuring packages' versions."""
    cpu_model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem_kib = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
        memory = f"{mem_kib / 1024**2:.0f} GiB"
    except (OSError, IndexError, ValueError):
        memory = "unknown"
    described = {
        "cpu": cpu_model,
        "cores (nproc)": str(os.cpu_count()),
        "memory": memory,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }
    for package in MEASURING_PACKAGES:
        try:
            described[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            described[package] = "not installed"
    return described


def git_commit() -> str:
    """The short commit the measured code was at ("unknown" outside a git checkout)."""
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


@dataclass
class Record:
    """One measurement: what was run (`command`), where (`where`: commit, server, machine), when (UTC), and
    the figures (the study's own, JSON-serializable)."""

    study: str
    command: str
    when: str
    where: dict
    figures: dict = field(default_factory=dict)

    @classmethod
    def begin(
        cls,
        study: str,
        program: str,
        argv: list[str] | None = None,
        server: str = "",
        stamp: datetime | None = None,
    ) -> Record:
        """A record of `program` run with `argv` (default: this process's arguments), stamped now."""
        stamp = stamp or datetime.now(timezone.utc)
        return cls(
            study=study,
            command=" ".join([program, *(argv if argv is not None else sys.argv[1:])]),
            when=stamp.strftime("%Y-%m-%d %H:%M UTC"),
            where={"commit": git_commit(), "server": server, "machine": machine_description()},
        )

    def head_lines(self) -> list[str]:
        """The record's facts as the Markdown list at the top of its page."""
        return [
            f"- date: {self.when}",
            f"- commit: {self.where.get('commit', 'unknown')}",
            *([f"- server: {self.where['server']}"] if self.where.get("server") else []),
            *[f"- {key}: {value}" for key, value in self.where.get("machine", {}).items()],
            f"- command: `{self.command}`",
        ]

    def to_dict(self) -> dict:
        return {"schema": RECORD_SCHEMA, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict) -> Record:
        if data.get("schema") != RECORD_SCHEMA:
            raise ValueError(f"not a record of schema {RECORD_SCHEMA}: schema {data.get('schema')!r}")
        return cls(data["study"], data["command"], data["when"], data["where"], data["figures"])


def write_record(record: Record, path: Path, page: list[str] | str) -> tuple[Path, Path]:
    """Writes path.json (the record) and path.md (`page`, the study's Markdown); returns both paths."""
    path.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = path.with_suffix(".json"), path.with_suffix(".md")
    json_path.write_text(json.dumps(record.to_dict(), indent=1) + "\n")
    text = page if isinstance(page, str) else "\n".join(page)
    md_path.write_text(text if text.endswith("\n") else text + "\n")
    return json_path, md_path


def read_record(path: Path) -> Record:
    """The record of path.json (path may name either file of the pair)."""
    return Record.from_dict(json.loads(path.with_suffix(".json").read_text()))
