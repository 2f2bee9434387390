"""`make gpu-host-check`'s comparison of answers (trt_plugin_kit/deploy/gpu_host_check.py) against the real
CPU variant: the TensorRT side cannot run here, so the CPU variant stands on both sides, and a wrong or
failing side must be reported by model and protocol."""

from __future__ import annotations

from trt_plugin_kit.deploy import gpu_host_check as check
from trt_plugin_kit.interface import L2NORM, MNIST, MNIST_PIPELINE, MNIST_PREPROCESS, PROTOCOLS


def test_every_model_over_both_protocols_against_the_real_cpu_variant(triton_server):
    """compare_servers with the CPU variant on both sides (the GPU side cannot run here): every model and
    protocol is compared and equal; a side that answers wrongly or fails is reported by model and
    protocol."""
    cpu = check.tritonclient_infer(triton_server.location)
    compared, problems = check.compare_servers(cpu, cpu)
    models = [MNIST_PIPELINE, MNIST_PREPROCESS, MNIST, L2NORM]
    assert problems == [] and compared == [f"{m}/{p}" for m in models for p in PROTOCOLS]

    def wrong(protocol, model, inputs, output):
        answer = cpu(protocol, model, inputs, output)
        if model == L2NORM and protocol == "grpc":
            return answer * 1.01
        if model == MNIST_PREPROCESS:
            raise RuntimeError("stub died")
        return answer

    _, problems = check.compare_servers(wrong, cpu)
    assert any(
        p.startswith(f"{L2NORM}: differs from the CPU variant") and p.endswith("(grpc)") for p in problems
    )
    assert f"{MNIST_PREPROCESS} over http: the TensorRT variant failed: stub died" in problems
    assert not any(p.endswith("(http)") and p.startswith(L2NORM) for p in problems)
