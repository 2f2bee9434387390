"""The compiled gRPC front under libFuzzer (issue 39, item 6): its ModelInfer rules and gRPC's own layer
(edge/native/fuzz/), built with clang's -fsanitize=fuzzer,address,undefined, each run for a fixed short time
from a seed corpus of test_edge_native.py's cases. A crash, a sanitizer report or a broken invariant fails
the test and leaves the input that found it (libFuzzer's crash-* file, named in the failure); that input
then becomes a case of test_edge_native.py.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest
from test_edge_native import CASES, MODELS

from trt_plugin_kit.interface import REPO_ROOT
from trt_plugin_kit.serving.edge.native_front import configuration, models_block

NATIVE = REPO_ROOT / "trt_plugin_kit" / "serving" / "edge" / "native"
BUILD = REPO_ROOT / "build" / "edge-fuzz"
SECONDS = 10  # per target: what CI can give each run of make test


def _clang_missing() -> str | None:
    clang = shutil.which("clang++")
    if clang is None:
        return "clang++ is not installed (apt-get install clang): the fuzz targets need libFuzzer"
    probe = subprocess.run(
        [clang, "-fsanitize=fuzzer", "-x", "c++", "-", "-o", "/dev/null"],
        input='extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }',
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        return f"clang++ cannot link libFuzzer here: {probe.stderr.strip()[:200]}"
    if shutil.which("cmake") is None:
        return "cmake is not installed"
    return None


MISSING = _clang_missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")


@pytest.fixture(scope="module")
def fuzzers() -> Path:
    """The targets, built once into build/edge-fuzz (ccache keeps later builds short)."""
    configured = subprocess.run(
        ["cmake", "-S", str(NATIVE), "-B", str(BUILD), "-DEDGE_FUZZ=ON", "-DCMAKE_CXX_COMPILER=clang++"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert configured.returncode == 0, configured.stdout + configured.stderr
    built = subprocess.run(
        ["cmake", "--build", str(BUILD), "-j", "2"], capture_output=True, text=True, check=False
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    return BUILD


def _fuzz(binary: Path, corpus: Path, tmp_path: Path, env: dict | None = None) -> None:
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    run = subprocess.run(
        [
            str(binary),
            f"-max_total_time={SECONDS}",
            "-timeout=5",
            "-rss_limit_mb=2048",
            "-max_len=65536",
            f"-artifact_prefix={artifacts}/",
            "-print_final_stats=1",
            str(corpus),
        ],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=SECONDS + 120,
    )
    found = sorted(path.name for path in artifacts.iterdir())
    assert run.returncode == 0 and not found, (found, run.stderr[-6000:])
    assert "stat::number_of_executed_units" in run.stderr, run.stderr[-2000:]


def test_the_model_infer_rules_survive_the_fuzzer(fuzzers, tmp_path):
    config = tmp_path / "config"
    config.write_text(
        configuration("127.0.0.1:0", "unix:/nonexistent", "unix:/nonexistent", ["ServerLive"])
        + models_block(MODELS)
    )
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for index, raw in enumerate(CASES.values()):
        (corpus / f"case-{index}").write_bytes(raw)
    _fuzz(fuzzers / "fuzz-model-infer", corpus, tmp_path, env=dict(os.environ, EDGE_FUZZ_CONFIG=str(config)))


def test_the_grpc_framing_survives_the_fuzzer(fuzzers, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    message = next(iter(CASES.values()))
    seeds = [
        b"\x00" + b"10S",  # grpc-timeout
        b"\x00" + b"99999999n",
        b"\x01" + "line\nbreak % ünïcode".encode(),  # grpc-message
        b"\x02" + message,  # the prefix
        b"\x03" + zlib.compress(message),  # deflate
        b"\x07" + gzip.compress(message),  # gzip
        b"\x07" + gzip.compress(bytes(4 << 20)),  # a small bomb: past the target's 1 MiB
    ]
    for index, seed in enumerate(seeds):
        (corpus / f"seed-{index}").write_bytes(seed)
    _fuzz(fuzzers / "fuzz-framing", corpus, tmp_path)
