"""The Kubernetes autoscaler's metric against a real tritonserver: the prometheus-adapter rule queries metric
families Triton exports, and loadtests.queue_signal reads the same ratio from a real server's counters.
"""

from __future__ import annotations

import re
import time
import urllib.request

from trt_plugin_kit.interface import REPO_ROOT

KUBERNETES_DIR = REPO_ROOT / "deploy" / "kubernetes"


def test_adapter_queries_metrics_triton_exports(triton_server):
    # The real server's /metrics (CPU variant, same Triton metric families as the TensorRT one).
    exported = urllib.request.urlopen(triton_server.metrics_url, timeout=10).read().decode()
    values = (KUBERNETES_DIR / "prometheus-adapter" / "values.yaml").read_text()
    queried = set(re.findall(r"\b(nv_[a-z_]+)\{", values))
    assert queried == {"nv_inference_queue_duration_us", "nv_inference_request_success"}
    for name in queried:
        assert re.search(rf"^{name}\{{", exported, flags=re.MULTILINE), f"Triton exports no {name}"


def test_queue_signal_counts_what_the_server_served(triton_server):
    # loadtests.queue_signal computes the adapter's ratio from a real server's counters.
    import numpy as np  # noqa: PLC0415
    import tritonclient.grpc as grpcclient  # noqa: PLC0415

    from loadtests.studies.queue_signal import QUEUE_COUNTER, SUCCESS_COUNTER, queue_ratio, read_counters  # noqa: PLC0415
    from trt_plugin_kit.interface import L2NORM, L2NORM_INPUT  # noqa: PLC0415

    before = read_counters(triton_server.metrics_url)
    client = grpcclient.InferenceServerClient(triton_server.grpc_url)
    vectors = np.ones((2, 16), dtype=np.float32)
    request = grpcclient.InferInput(L2NORM_INPUT, list(vectors.shape), "FP32")
    request.set_data_from_numpy(vectors)
    for _ in range(5):
        client.infer(L2NORM, [request])
    client.close()
    # Triton counts a request after it has sent the answer: on a busy machine the last one can be missing
    # from a read made at once (CI read 4 of 5), so read until all five are in, or 10 s have passed.
    deadline = time.monotonic() + 10
    while True:
        after = read_counters(triton_server.metrics_url)
        served = after[SUCCESS_COUNTER][L2NORM] - before[SUCCESS_COUNTER].get(L2NORM, 0)
        if served >= 5 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert served == 5
    assert after[QUEUE_COUNTER][L2NORM] >= before[QUEUE_COUNTER].get(L2NORM, 0)
    ratio, per_model = queue_ratio(before, after)
    assert set(per_model) == {L2NORM} and ratio == per_model[L2NORM] >= 0
    assert queue_ratio(after, after) == (0.0, {})  # an idle window reads 0, as clamp_min makes it
