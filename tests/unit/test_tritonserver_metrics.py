"""The one reader of Triton's Prometheus metrics (trt_plugin_kit.tritonserver.metrics), on its text format."""

from __future__ import annotations

from trt_plugin_kit.tritonserver import metrics

TEXT = """\
# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="mnist",version="1"} 12
nv_inference_request_success{model="mnist",version="2"} 3
nv_inference_request_success{model="l2norm",version="1"} 7
nv_inference_request_failure{model="l2norm",reason="REJECTED",version="1"} 2
nv_inference_request_failure{model="l2norm",reason="BACKEND",version="1"} 1
nv_inference_queue_duration_us{model="mnist",version="1"} 1.5e+03
nv_gpu_utilization{gpu_uuid="GPU-0"} 0.5
"""


def test_series_are_summed_per_model():
    read = metrics.parse_metrics(TEXT, (metrics.REQUEST_SUCCESS, metrics.REQUEST_FAILURE))
    assert read == {
        metrics.REQUEST_SUCCESS: {"mnist": 15.0, "l2norm": 7.0},
        metrics.REQUEST_FAILURE: {"l2norm": 3.0},
    }


def test_only_the_metrics_asked_for_are_kept_and_missing_ones_are_empty():
    read = metrics.parse_metrics(TEXT, (metrics.QUEUE_DURATION_US, "nv_not_there"))
    assert read == {metrics.QUEUE_DURATION_US: {"mnist": 1500.0}, "nv_not_there": {}}


def test_a_replica_that_does_not_answer_counts_none():
    assert metrics.total("http://127.0.0.1:9/metrics", metrics.REQUEST_SUCCESS, timeout_s=1) is None
