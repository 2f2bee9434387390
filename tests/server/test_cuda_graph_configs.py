"""tritonserver 2.51 itself reads the TensorRT configurations with their CUDA graph specs.

PyTriton's tritonserver has no TensorRT backend, so loading `mnist`/`l2norm` (TensorRT variant) fails here
once the configuration has been parsed and normalised, at the backend look-up. A configuration Triton cannot
parse fails earlier, at the repository poll: the control case shows the test tells the two apart.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from trt_plugin_kit.interface import L2NORM, MNIST, REPO_ROOT
from trt_plugin_kit.serving.server import cpu_environment, find_pytriton_distribution

PARSED = "unable to find backend library for backend 'tensorrt'"
NOT_PARSED = "failed to read text proto"


def load_with_tritonserver(model: str, config_text: str, tmp_path) -> str:
    distribution = find_pytriton_distribution()
    model_dir = tmp_path / "repository" / model
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(config_text)
    for extra in (REPO_ROOT / "model_repository" / model).glob("*.txt"):  # label files
        shutil.copy(extra, model_dir)
    (model_dir / "1" / "model.plan").write_bytes(b"not read: the backend is looked up first")
    result = subprocess.run(
        [
            str(distribution.tritonserver),
            f"--model-repository={model_dir.parent}",
            "--model-control-mode=explicit",
            f"--load-model={model}",
            "--disable-auto-complete-config",
            "--exit-on-error=true",
            "--allow-http=false",
            "--allow-grpc=false",
            "--allow-metrics=false",
            "--exit-timeout-secs=1",
            f"--backend-directory={tmp_path / 'no-backends'}",
            "--pinned-memory-pool-byte-size=0",
            "--cuda-memory-pool-byte-size=0:0",
        ],
        env=cpu_environment(distribution, dict(os.environ)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0, "tritonserver loaded a TensorRT model without a TensorRT backend?"
    return result.stdout + result.stderr


@pytest.mark.parametrize("model", (MNIST, L2NORM))
def test_tritonserver_parses_the_cuda_graph_specs(model, tmp_path):
    text = (REPO_ROOT / "model_repository" / model / "config.pbtxt").read_text()
    assert "graph_spec" in text
    log = load_with_tritonserver(model, text, tmp_path)
    assert PARSED in log and NOT_PARSED not in log, log[-3000:]


def test_tritonserver_refuses_a_misspelt_graph_field(tmp_path):
    text = (REPO_ROOT / "model_repository" / MNIST / "config.pbtxt").read_text()
    broken = text.replace("graph_lower_bound {", "graph_lower_bund {", 1)
    assert broken != text
    log = load_with_tritonserver(MNIST, broken, tmp_path)
    assert NOT_PARSED in log and 'no field named "graph_lower_bund"' in log, log[-3000:]
