"""Accuracy, confusion matrix, throughput and latency percentiles, and their text form."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

PERCENTILES = (50, 90, 99)


def confusion_matrix(true: Sequence[int], predicted: Sequence[int], num_classes: int = 10) -> np.ndarray:
    """matrix[t, p] = how many items of true class t were predicted as p."""
    true_arr = np.asarray(true, dtype=np.int64)
    pred_arr = np.asarray(predicted, dtype=np.int64)
    if true_arr.shape != pred_arr.shape:
        raise ValueError(f"{true_arr.size} labels but {pred_arr.size} predictions")
    for name, values in (("label", true_arr), ("prediction", pred_arr)):
        if values.size and (values.min() < 0 or values.max() >= num_classes):
            raise ValueError(f"{name} outside 0..{num_classes - 1}")
    matrix = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(matrix, (true_arr, pred_arr), 1)
    return matrix


def accuracy(matrix: np.ndarray) -> float:
    total = int(matrix.sum())
    return float(np.trace(matrix)) / total if total else 0.0


def format_confusion_matrix(matrix: np.ndarray, labels: Sequence[str] | None = None) -> str:
    """Rows: true class, columns: predicted class, plus per-class recall on the right."""
    n = matrix.shape[0]
    labels = [str(i) for i in range(n)] if labels is None else [str(label) for label in labels]
    width = max(5, max(len(str(int(matrix.max()))) if matrix.size else 1, max(len(x) for x in labels)) + 1)
    header = "true\\pred".rjust(9) + "".join(label.rjust(width) for label in labels) + "  recall"
    lines = [header]
    for i in range(n):
        row_total = int(matrix[i].sum())
        recall = f"{matrix[i, i] / row_total:.4f}" if row_total else "   -  "
        cells = "".join(str(int(v)).rjust(width) for v in matrix[i])
        lines.append(labels[i].rjust(9) + cells + "  " + recall)
    return "\n".join(lines)


@dataclass
class LatencySummary:
    count: int
    mean_ms: float
    max_ms: float
    percentiles_ms: dict[int, float]

    def as_dict(self) -> dict:
        out = {"count": self.count, "mean_ms": self.mean_ms, "max_ms": self.max_ms}
        out.update({f"p{p}_ms": v for p, v in self.percentiles_ms.items()})
        return out

    def format(self) -> str:
        parts = "  ".join(f"p{p} {v:.2f}" for p, v in self.percentiles_ms.items())
        return f"{parts}  (mean {self.mean_ms:.2f}, max {self.max_ms:.2f}, {self.count} requests)"


def summarize_latencies(
    latencies_s: Sequence[float], percentiles: Sequence[int] = PERCENTILES
) -> LatencySummary:
    """Percentiles by linear interpolation between closest ranks (numpy's default)."""
    values_ms = np.asarray(latencies_s, dtype=np.float64) * 1000.0
    if values_ms.size == 0:
        return LatencySummary(0, 0.0, 0.0, {p: 0.0 for p in percentiles})
    return LatencySummary(
        count=int(values_ms.size),
        mean_ms=float(values_ms.mean()),
        max_ms=float(values_ms.max()),
        percentiles_ms={p: float(np.percentile(values_ms, p)) for p in percentiles},
    )


def format_accuracy_line(value: float) -> str:
    """The last line of `eval`, parsed by scripts: exactly `accuracy: 0.9850`."""
    return f"accuracy: {value:.4f}"
