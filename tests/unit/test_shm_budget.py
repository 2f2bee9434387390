"""The Python backend's shared-memory budget (trt_plugin_kit/serving/shm_budget.py): its arithmetic, the
flags it
gives tritonserver and the instances it counts. The deployment files are held to it by test_compose.py and
test_kubernetes.py."""

from __future__ import annotations

import pytest

from trt_plugin_kit.serving import shm_budget
from trt_plugin_kit.serving.edge import limits as edge_limits
from trt_plugin_kit.serving.shm_budget import MIB


def test_a_region_holds_the_largest_request_and_response_of_one_execute():
    assert shm_budget.LARGEST_REQUEST_BYTES == edge_limits.MAX_REQUEST_BYTES == 32 * MIB
    # A gRPC message may carry its 64 KiB of framing on top of the request limit: the slack covers it.
    assert edge_limits.MAX_GRPC_MESSAGE_BYTES - edge_limits.MAX_REQUEST_BYTES < shm_budget.SLACK_BYTES
    # l2norm answers 64 vectors of at most 4096 float32: the largest response of the Python models.
    assert shm_budget.LARGEST_RESPONSE_BYTES == 64 * 4096 * 4
    assert shm_budget.SHM_DEFAULT_BYTES == (1 + 32 + 1 + 1) * MIB


def test_no_region_can_grow_into_the_room_left_for_other_files():
    """A growth takes at least one step (python_backend: step x (n // step + 1) for n bytes)."""
    assert shm_budget.OTHER_FILES_BYTES < shm_budget.SHM_GROWTH_BYTES
    assert shm_budget.required_shm_bytes(4) == 4 * 35 * MIB + 1 * MIB
    assert shm_budget.required_shm_bytes(0) == shm_budget.OTHER_FILES_BYTES
    with pytest.raises(ValueError, match="instances"):
        shm_budget.required_shm_bytes(-1)


def test_the_flags_are_what_tritonserver_takes():
    assert shm_budget.python_backend_shm_flags() == [
        "--backend-config=python,shm-default-byte-size=36700160",
        "--backend-config=python,shm-growth-byte-size=2097152",
    ]
    # The backend refuses a default below 1 MiB and a growth of 0 (python_be.cc).
    assert shm_budget.SHM_DEFAULT_BYTES >= MIB and shm_budget.SHM_GROWTH_BYTES > 0


def test_instances_are_counted_from_the_configurations_each_variant_loads():
    # cpu: mnist 1 + l2norm 1 + mnist_preprocess 2 (configs/cpu.pbtxt) + mnist_vit 1 (the plugin_onnx
    # stand-in, the Python backend under another name); tensorrt: mnist_preprocess 4 (the other models are
    # TensorRT engines, mnist_pipeline an ensemble).
    assert shm_budget.python_backend_instances("cpu") == 5
    assert shm_budget.python_backend_instances("tensorrt") == 4
    with pytest.raises(ValueError, match="variant"):
        shm_budget.python_backend_instances("gpu")


def test_instances_of_a_repository_with_groups_defaults_and_gpu_models(tmp_path):
    def model(name: str, text: str, cpu: str | None = None) -> None:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.pbtxt").write_text(f'name: "{name}"\n{text}')
        if cpu is not None:
            (tmp_path / name / "configs").mkdir()
            (tmp_path / name / "configs" / "cpu.pbtxt").write_text(f'name: "{name}"\n{cpu}')

    model("a", 'backend: "python"\ninstance_group [ { count: 3 kind: KIND_CPU }, { kind: KIND_CPU } ]\n')
    model("b", 'backend: "python"\n')  # no instance_group: one instance
    model("c", 'platform: "tensorrt_plan"\n', cpu='backend: "python"\ninstance_group [ { count: 2 } ]\n')
    assert shm_budget.python_backend_instances("tensorrt", tmp_path) == 3 + 1 + 1
    assert shm_budget.python_backend_instances("cpu", tmp_path) == 3 + 1 + 1 + 2
    model("d", 'backend: "python"\ninstance_group [ { count: 1 kind: KIND_GPU } ]\n')
    with pytest.raises(ValueError, match="one instance per GPU"):
        shm_budget.python_backend_instances("tensorrt", tmp_path)


def test_sizes_are_written_in_whole_mebibytes():
    assert shm_budget.format_mebibytes(141 * MIB, "Mi") == "141Mi"
    assert shm_budget.format_mebibytes(141 * MIB, "mb") == "141mb"
    with pytest.raises(ValueError, match="whole number"):
        shm_budget.format_mebibytes(MIB + 1, "Mi")
