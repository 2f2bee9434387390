"""`make model-analyzer` for real, tiny: NVIDIA's Model Analyzer 1.58 (its own venv) in remote mode against
a loopback tritonserver with explicit model control, perf_analyzer from where `make perf` takes it, one
candidate configuration beside the shipped one at one concurrency (about a minute here). Skips only where
perf_analyzer cannot run at all (loadtests/perf/tool.py's why_cannot_run says when)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loadtests import model_analyzer
from loadtests.perf import tool
from trt_plugin_kit.interface import REPO_ROOT

pytestmark = pytest.mark.skipif(tool.why_cannot_run() is not None, reason=str(tool.why_cannot_run()))


def test_a_tiny_search_recommends_and_reports(tmp_path):
    analyzer = os.environ.get("MODEL_ANALYZER") or str(model_analyzer.MODEL_ANALYZER)
    if not Path(analyzer).is_file():
        pytest.fail("model-analyzer not found: `make test-tools` installs it into .venv-model-analyzer")
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadtests.model_analyzer",
            "--tiny",
            "--out",
            str(out),
            "--model-analyzer",
            analyzer,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    with (out / model_analyzer.RESULTS_CSV).open() as handle:
        rows = list(csv.DictReader(handle))
    # The shipped configuration and the one candidate, measured at the one concurrency, with rows per second.
    assert sorted(r["Model Config Path"] for r in rows) == ["mnist_config_0", "mnist_config_default"], rows
    assert all(float(r["Throughput (infer/sec)"]) > 0 and r["Concurrency"] == "2" for r in rows), rows
    text = (out / "recommendation.md").read_text()
    assert "`mnist_config_default` (shipped)" in text and "delay 500 µs, preferred 16,32,64" in text, text
    assert "delay 0 µs" in text and "Verdict:" in text, text
    # A winner's configuration is written only where there is one.
    assert (out / model_analyzer.WINNER_CONFIG).is_file() == ("Verdict: `" in text), text
    # Model Analyzer's own summary report (HTML here: no wkhtmltopdf for its PDF).
    assert list(out.glob("result_summary.*")), sorted(p.name for p in out.iterdir())
