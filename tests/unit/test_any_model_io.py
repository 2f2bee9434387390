"""Any served model's tensors (trt_plugin_kit/tritonserver/model_io.py) and the load tests' request kind built
on them (loadtests/any_model.py), without a server: metadata of both protocols, data from .npy/.npz or
generated, the checks of inputs and responses, the mix naming a model, and the Locust flags round trip.
(Against the real server: tests/server/test_plugin_onnx_stand_in.py.)"""

from __future__ import annotations

import argparse
import re
import subprocess

import numpy as np
import pytest

from loadtests import any_model
from loadtests.options import add_workload_arguments, locust_arguments, request_mix, workload_from_args
from loadtests.outcomes import ResponseCheckError
from trt_plugin_kit.interface import REPO_ROOT
from trt_plugin_kit.tritonserver.model_io import (
    ModelDataError,
    ModelIO,
    check_inputs,
    generate_inputs,
    output_problems,
    read_inputs,
    value_range,
)

HTTP_METADATA = {
    "name": "pair",
    "inputs": [
        {"name": "a", "datatype": "FP32", "shape": [-1, 16]},
        {"name": "n", "datatype": "INT32", "shape": [-1, -1]},
    ],
    "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 1]}],
}
HTTP_CONFIG = {"name": "pair", "max_batch_size": 8}
# gRPC's JSON form: int64 as strings, the configuration wrapped.
GRPC_METADATA = {
    "name": "pair",
    "inputs": [
        {"name": "a", "datatype": "FP32", "shape": ["-1", "16"]},
        {"name": "n", "datatype": "INT32", "shape": ["-1", "-1"]},
    ],
    "outputs": [{"name": "y", "datatype": "FP32", "shape": ["-1", "1"]}],
}
GRPC_CONFIG = {"config": {"name": "pair", "max_batch_size": "8"}}


def model() -> ModelIO:
    return ModelIO.from_server(HTTP_METADATA, HTTP_CONFIG)


def test_both_protocols_describe_the_same_model():
    assert ModelIO.from_server(GRPC_METADATA, GRPC_CONFIG) == model()
    io = model()
    assert (io.max_batch_size, [t.dims for t in io.inputs], io.outputs[0].dims) == (8, [(16,), (-1,)], (1,))
    assert "inputs a FP32 [batch, 16]; n INT32 [batch, any]" in io.describe()
    unbatched = ModelIO.from_server(HTTP_METADATA, {"max_batch_size": 0})
    assert unbatched.inputs[0].dims == (-1, 16) and not unbatched.batching


def test_generated_inputs_follow_types_shapes_and_range():
    arrays = generate_inputs(model(), 5, low=0.0, high=3.0, dim=7, seed=1)
    assert arrays["a"].shape == (5, 16) and arrays["a"].dtype == np.float32
    assert 0.0 <= arrays["a"].min() and arrays["a"].max() < 3.0
    assert (
        arrays["n"].shape == (5, 7)
        and arrays["n"].dtype == np.int32
        and set(np.unique(arrays["n"])) <= {0, 1, 2, 3}
    )
    assert check_inputs(model(), arrays) == 5
    with pytest.raises(ValueError, match="LOW < HIGH"):
        value_range("2:1")


def test_files_are_read_checked_and_refused_with_the_reason(tmp_path):
    good = tmp_path / "in.npz"
    np.savez(good, a=np.ones((3, 16), np.float64), n=np.arange(6).reshape(3, 2))
    arrays = read_inputs(model(), good)
    assert arrays["a"].dtype == np.float32 and arrays["n"].dtype == np.int32  # exact casts
    cases = {
        "missing.npz": ({"a": np.ones((3, 16), np.float32)}, "missing ['n']"),
        "shape.npz": (
            {"a": np.ones((3, 15), np.float32), "n": np.ones((3, 2), np.int32)},
            "'a' has shape [3, 15]",
        ),
        "inexact.npz": (
            {"a": np.ones((3, 16), np.float32), "n": np.full((3, 2), 0.5)},
            "not every value converts",
        ),
        "counts.npz": (
            {"a": np.ones((3, 16), np.float32), "n": np.ones((2, 2), np.int32)},
            "different numbers",
        ),
    }
    for name, (content, words) in cases.items():
        np.savez(tmp_path / name, **content)
        with pytest.raises(ModelDataError, match=re.escape(words)):
            read_inputs(model(), tmp_path / name)
    np.save(tmp_path / "one.npy", np.ones((3, 16), np.float32))
    with pytest.raises(ModelDataError, match="has 2 inputs: give an .npz"):
        read_inputs(model(), tmp_path / "one.npy")
    (tmp_path / "bad.npz").write_bytes(b"not numpy")
    with pytest.raises(ModelDataError, match="not a readable NumPy file"):
        read_inputs(model(), tmp_path / "bad.npz")
    np.save(tmp_path / "objects.npy", np.array([{"x": 1}], dtype=object), allow_pickle=True)
    one_input = ModelIO.from_server(
        {"name": "m", "inputs": HTTP_METADATA["inputs"][:1], "outputs": []}, HTTP_CONFIG
    )
    with pytest.raises(ModelDataError, match="not a readable NumPy file"):  # never unpickled
        read_inputs(one_input, tmp_path / "objects.npy")


def test_responses_are_checked_against_the_declared_outputs():
    io = model()
    assert output_problems(io, 2, {"y": np.zeros((2, 1), np.float32)}) == []
    assert output_problems(io, 2, {}) == ["no output 'y'"]
    assert "is float64" in output_problems(io, 2, {"y": np.zeros((2, 1))})[0]
    assert "shape [3, 1] for 2 item(s)" in output_problems(io, 2, {"y": np.zeros((3, 1), np.float32)})[0]


def test_a_mix_names_models_of_the_server_besides_our_kinds():
    assert request_mix("mnist=2,scaled_poly=1") == {
        "mnist_pipeline": 0,
        "mnist": 2,
        "l2norm": 0,
        "scaled_poly": 1,
    }
    with pytest.raises(ValueError, match="neither a request kind"):
        request_mix("bad name=1")


def test_the_model_task_sends_batches_from_its_pool_and_checks_answers(tmp_path):
    np.savez(
        tmp_path / "in.npz", a=np.arange(48, dtype=np.float32).reshape(3, 16), n=np.ones((3, 2), np.int32)
    )
    task = any_model.ModelTask(
        "pair", any_model.ModelDataOptions(batch=5, files={"pair": str(tmp_path / "in.npz")})
    )
    task.prepare(model())
    inputs = task.make_inputs()
    assert inputs["a"].shape == (5, 16) and inputs["n"].shape == (5, 2)  # 3 items, repeated
    task.check(inputs, {"y": np.zeros((5, 1), np.float32)})
    with pytest.raises(ResponseCheckError, match="no output 'y'"):
        task.check(inputs, {})
    with pytest.raises(ModelDataError, match="more than pair's max_batch_size 8"):
        any_model.ModelTask("pair", any_model.ModelDataOptions(batch=9)).prepare(model())
    generated = any_model.ModelTask("pair", any_model.ModelDataOptions(batch=2, low=5, high=6, dim=3))
    generated.prepare(model())
    assert generated.make_inputs()["n"].shape == (2, 3) and generated.output_names == ("y",)


def test_the_model_options_reach_locust_unchanged():
    argv = ["--mix", "scaled_poly=1", "--model-batch", "3", "--model-data", "scaled_poly=x.npy"]
    argv += ["--model-range=-2:0.5", "--model-dim", "5"]
    parser = argparse.ArgumentParser()
    add_workload_arguments(parser)
    workload = workload_from_args(parser.parse_args(argv))
    assert workload.model_data == any_model.ModelDataOptions(3, {"scaled_poly": "x.npy"}, -2.0, 0.5, 5)
    assert workload_from_args(parser.parse_args(locust_arguments(workload, 5.0))) == workload
    assert "http scaled_poly b3" in workload.request_names()


def test_make_lint_formats_untracked_plugin_files_too(tmp_path):
    """`make lint`'s file list (the Makefile's own command) includes a new plugin's files before they are
    committed, and nothing git ignores."""
    recipe = next(
        line for line in (REPO_ROOT / "Makefile").read_text().splitlines() if "clang-format --dry-run" in line
    )
    command = recipe.split("$$(", 1)[1].rsplit(")", 1)[0]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("build/\n")
    for name in ("plugins/new_op/new_op_plugin.cpp", "plugins/build/ignored.cpp", "build/x.cpp"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("int x;\n")
    listed = subprocess.run(
        command, shell=True, cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert listed.split() == ["plugins/new_op/new_op_plugin.cpp"]
