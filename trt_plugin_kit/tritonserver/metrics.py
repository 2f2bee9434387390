"""Triton's Prometheus metrics, read one way for every tool (soak, queue signal, failover).

``read_metrics(url, names)`` gives ``{metric: {model: value}}``, each model's series summed (Triton labels
them by model and version). Reading is one GET of the text format; parsing keeps only the metrics asked for.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections import defaultdict

QUEUE_DURATION_US = "nv_inference_queue_duration_us"
REQUEST_SUCCESS = "nv_inference_request_success"
REQUEST_FAILURE = "nv_inference_request_failure"
# A sample with labels, or without (the response cache's own gauges: their "model" is "").
_SAMPLE = re.compile(r"^(\w+)(?:\{([^}]*)\})?\s+(\S+)$", re.MULTILINE)
_MODEL = re.compile(r'model="([^"]*)"')


def parse_metrics(text: str, names: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """{metric: {model: value summed over the model's series}} for ``names`` in Prometheus ``text``."""
    values: dict[str, dict[str, float]] = {name: defaultdict(float) for name in names}
    for name, labels, value in _SAMPLE.findall(text):
        if name in values:
            model = _MODEL.search(labels)  # no labels: ""
            values[name][model[1] if model else ""] += float(value)
    return {name: dict(per_model) for name, per_model in values.items()}


def read_metrics(url: str, names: tuple[str, ...], timeout_s: float = 10) -> dict[str, dict[str, float]]:
    """:func:`parse_metrics` of the metrics endpoint ``url`` (http://host:port/metrics)."""
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return parse_metrics(response.read().decode(), names)


def total(url: str, name: str, timeout_s: float = 2) -> float | None:
    """``name`` summed over every model, None when the endpoint does not answer (a replica that is down)."""
    try:
        return sum(read_metrics(url, (name,), timeout_s)[name].values())
    except (urllib.error.URLError, OSError):
        return None
