"""`build_engines.py --model NAME` for a model of yours (#24 item 3): any folder of the repository holding a
TensorRT config.pbtxt and its plugin-flavour model.onnx, as new-plugin writes it. What runs without TensorRT:
arguments, the optimization profile from the config, precision variants, the checks against the config, the
dry run, and the clear "no TensorRT" stop (exit 3). (The build itself: TensorRT on a GPU host.)"""

from __future__ import annotations

import subprocess
import sys

import pytest

from trt_plugin_kit.engines.cli import parse_args
from trt_plugin_kit.engines.consistency import profile_shapes
from trt_plugin_kit.engines.errors import EXIT_ENVIRONMENT, EXIT_USAGE, BuildFailure, UsageError
from trt_plugin_kit.engines.jobs import describe, make_build_jobs
from trt_plugin_kit.engines.verify import generated_feeds
from trt_plugin_kit.interface import REPO_ROOT
from trt_plugin_kit.scaffold import model as served_model
from trt_plugin_kit.specs import spec as plugin_spec
from trt_plugin_kit.tritonserver.config import model_config_from_text

ITEM = served_model.ITEM_LENGTH


@pytest.fixture
def repository(tmp_path):
    root = tmp_path / "model_repository"
    root.mkdir()
    served_model.create(plugin_spec.get("LeakyReLU"), False, root)
    served_model.create(plugin_spec.get("ConcatCopy"), False, root)
    return root


def jobs(repository, *arguments: str, major: int = 10):
    return make_build_jobs(parse_args(["--model-repository", str(repository), *arguments]), major)


def test_a_model_of_yours_builds_its_onnx_file_into_its_version_folder(repository):
    (job,) = jobs(repository, "--model", "leaky_relu")
    assert job.onnx_source == repository / "leaky_relu" / "model.onnx"
    assert job.output == repository / "leaky_relu" / "1" / "model.plan"
    assert job.required_plugins() == ["LeakyReLU"] and job.recipe.graph == "fp32"
    assert job.profile == {
        "x": ((1, ITEM), (64, ITEM), (64, ITEM))
    }  # batch 1..max_batch_size from the config
    (two,) = jobs(repository, "--model", "concat_copy", "--opt-batch", "8")
    assert set(two.profile) == {"in0", "in1"} and two.profile["in0"][1] == (8, ITEM)
    assert "plugins        ConcatCopy" in describe(two)


def test_precision_variants(repository):
    (fp16,) = jobs(repository, "--model", "leaky_relu", "--precision", "fp16", major=11)
    assert fp16.recipe.strongly_typed and fp16.recipe.graph == "fp16"
    assert "Cast" in [node.op_type for node in fp16.onnx_model.graph.node]  # FP16 inside, FP32 I/O
    (flag,) = jobs(repository, "--model", "leaky_relu", "--precision", "fp16", major=10)
    assert flag.recipe.builder_flags == ("FP16",)
    with pytest.raises(UsageError, match="int8 needs calibrated scales, which only mnist has"):
        jobs(repository, "--model", "leaky_relu", "--precision", "int8")
    with pytest.raises(UsageError, match="one ONNX file, the plugin flavour"):
        jobs(repository, "--model", "leaky_relu", "--flavour", "native")


def test_bad_model_names_and_folders_are_refused_with_what_is_there(repository):
    with pytest.raises(UsageError, match=r"config.pbtxt not found.*there: concat_copy, leaky_relu"):
        jobs(repository, "--model", "resnet")
    with pytest.raises(UsageError, match="a model folder name"):
        jobs(repository, "--model", "../leaky_relu")
    (repository / "leaky_relu" / "model.onnx").unlink()
    with pytest.raises(UsageError, match="model.onnx not found"):
        jobs(repository, "--model", "leaky_relu")


def test_the_config_must_match_the_graph(repository):
    config = repository / "leaky_relu" / "config.pbtxt"
    config.write_text(config.read_text().replace(f"dims: [ {ITEM} ]", "dims: [ 8 ]", 1))
    with pytest.raises((BuildFailure, UsageError), match="'x'"):
        jobs(repository, "--model", "leaky_relu")


def test_dynamic_dims_take_their_profile_range_from_dim_range():
    config = model_config_from_text(
        'name: "m" platform: "tensorrt_plan" max_batch_size: 4 '
        'input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, -1 ] } ] '
        'output [ { name: "y" data_type: TYPE_FP32 dims: [ -1 ] } ]'
    )
    with pytest.raises(UsageError, match="--dim-range MIN:OPT:MAX"):
        profile_shapes("m", config)
    assert profile_shapes("m", config, 2, (1, 64, 256)) == {"x": ((1, 3, 1), (2, 3, 64), (4, 3, 256))}
    assert parse_args(["--dim-range", "1:64:256"]).dim_range == (1, 64, 256)


def test_verify_inputs_follow_the_config_and_profile(repository):
    (job,) = jobs(repository, "--model", "concat_copy")
    feeds = generated_feeds(job, 3)
    assert {name: (a.shape, a.dtype.name) for name, a in feeds.items()} == {
        "in0": ((3, ITEM), "float32"),
        "in1": ((3, ITEM), "float32"),
    }
    assert all(-1 <= a.min() and a.max() < 1 for a in feeds.values())


def run_script(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "build_engines.py"), *arguments],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
    )  # fmt: skip


def test_command_line_dry_run_and_the_no_tensorrt_stop(repository):
    result = run_script("--model-repository", str(repository), "--model", "leaky_relu", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "leaky_relu plugin fp32:" in result.stdout and f"x [1, {ITEM}]..[64, {ITEM}]" in result.stdout
    result = run_script("--model-repository", str(repository), "--model", "leaky_relu", "--verify")
    assert result.returncode == EXIT_ENVIRONMENT, result.stderr
    assert "TensorRT Python package is not installed" in result.stderr and "Traceback" not in result.stderr
    assert not (repository / "leaky_relu" / "1" / "model.plan").exists()
    result = run_script("--model-repository", str(repository), "--model", "nothing_here", "--dry-run")
    assert result.returncode == EXIT_USAGE and "config.pbtxt not found" in result.stderr
