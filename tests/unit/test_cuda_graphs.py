"""CUDA graphs in the TensorRT configurations of `mnist` and `l2norm`: parsed as Triton parses them (protobuf
text format with Triton's ModelConfig message), valid by the TensorRT backend's own rules, and covering every
batch the dynamic batcher can form. tests/server/test_cuda_graph_configs.py has tritonserver 2.51 read them.
"""

from __future__ import annotations

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from trt_plugin_kit.interface import L2NORM, MNIST, REPO_ROOT

GRAPH_MODELS = (MNIST, L2NORM)


def parse(model: str):
    path = REPO_ROOT / "model_repository" / model / "config.pbtxt"
    return text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())


def expected_graph_batches(config) -> list[int]:
    """Powers of two up to max_batch_size, plus max_batch_size: the rule the configs' comment states."""
    sizes, size = [], 1
    while size < config.max_batch_size:
        sizes.append(size)
        size *= 2
    return [*sizes, config.max_batch_size]


def graph_ranges(config) -> list[tuple[int, int]]:
    """(lowest, highest) batch size each graph serves: the TensorRT backend's match rule."""
    ranges = []
    for spec in config.optimization.cuda.graph_spec:
        low = spec.graph_lower_bound.batch_size if spec.HasField("graph_lower_bound") else spec.batch_size
        ranges.append((low, spec.batch_size))
    return ranges


@pytest.mark.parametrize("model", GRAPH_MODELS)
def test_graphs_are_on_and_the_specs_are_valid_for_the_tensorrt_backend(model):
    # The checks of ValidateGraphSpec in triton-inference-server/tensorrt_backend (src/instance_state.cc).
    config = parse(model)
    assert config.platform == "tensorrt_plan" and config.optimization.cuda.graphs
    specs = config.optimization.cuda.graph_spec
    assert specs, "graphs: true without graph_spec captures only the backend's default sizes"
    inputs = {tensor.name: list(tensor.dims) for tensor in config.input}
    for spec in specs:
        assert 1 <= spec.batch_size <= config.max_batch_size
        # Every input shape given, fixed (no -1), the config's rank; without it the backend keys the graph on
        # the profile's opt shape and a lower bound never matches a smaller batch.
        assert set(spec.input) == set(inputs)
        for name, shape in spec.input.items():
            dims = list(shape.dim)
            assert len(dims) == len(inputs[name]) and all(d >= 0 for d in dims)
            assert all(want in (-1, d) for want, d in zip(inputs[name], dims, strict=True))
        if spec.HasField("graph_lower_bound"):
            bound = spec.graph_lower_bound
            assert 1 <= bound.batch_size <= spec.batch_size
            # Only the batch may be smaller than captured: a graph computes a fixed row length, so another
            # vector length (l2norm) would be read with the wrong stride.
            assert {k: list(v.dim) for k, v in bound.input.items()} == {
                k: list(v.dim) for k, v in spec.input.items()
            }


@pytest.mark.parametrize("model", GRAPH_MODELS)
def test_graphs_cover_every_batch_the_batcher_forms(model):
    config = parse(model)
    ranges = graph_ranges(config)
    assert [high for _, high in ranges] == expected_graph_batches(config)
    # Each size 1..max_batch_size in exactly one range, at most twice the rows computed.
    covered = [size for low, high in ranges for size in range(low, high + 1)]
    assert covered == list(range(1, config.max_batch_size + 1))
    assert all(high <= 2 * low for low, high in ranges)
    # The batches the batcher aims for and the warmup's run in a graph of their own size, nothing padded.
    exact = {high for _, high in ranges}
    assert set(config.dynamic_batching.preferred_batch_size) <= exact
    assert {sample.batch_size for sample in config.model_warmup} <= exact


def test_l2norm_graphs_are_for_the_warmup_vector_length():
    config = parse(L2NORM)
    warmup_lengths = {tuple(sample.inputs["vector"].dims) for sample in config.model_warmup}
    graph_lengths = {tuple(spec.input["vector"].dim) for spec in config.optimization.cuda.graph_spec}
    assert graph_lengths == warmup_lengths == {(128,)}


def test_the_cpu_configurations_have_no_cuda_graphs():
    for model in GRAPH_MODELS:
        path = REPO_ROOT / "model_repository" / model / "configs" / "cpu.pbtxt"
        config = text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())
        assert not config.optimization.cuda.graphs and not config.optimization.cuda.graph_spec
