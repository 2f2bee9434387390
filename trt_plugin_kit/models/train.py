"""Trains LeNet-5 on the MNIST dev digits in NumPy, reproducibly, and writes the weights and their record.

    .venv/bin/python -m trt_plugin_kit.models.train            # ~ a few minutes on 2 CPU cores

Writes ``models/lenet5_mnist.npz`` (float32 weights, see :mod:`trt_plugin_kit.models.lenet`) and
``models/lenet5_mnist.json`` (validation accuracy, seed, epochs, time, split sizes, hyper-parameters).

Reproducible: one seed drives the initialization, the shuffling and the augmentation; on the same
CPU model with the same NumPy, BLAS and thread count the weights are bit-identical run to run. OpenBLAS
picks its kernels by CPU model (and another BLAS build may round differently), so another CPU ends with
other weights and a slightly different accuracy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from trt_plugin_kit.interface import MODELS_DIR
from trt_plugin_kit.models import lenet, mnist
from trt_plugin_kit.tritonserver import options as cli_options
from trt_plugin_kit.tritonserver.options import run_reporting_input_errors

DEFAULT_WEIGHTS = MODELS_DIR / "lenet5_mnist.npz"


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 20240501
    epochs: int = 16
    batch_size: int = 64
    learning_rate: float = 2e-3  # Adam; cosine-decayed to final_learning_rate over all steps
    final_learning_rate: float = 2e-5
    weight_decay: float = 1e-4  # decoupled (AdamW), weights only
    max_shift: int = 2  # augmentation: random translation by up to this many pixels in x and y


class Adam:
    """AdamW on a dict of float32 arrays (decoupled weight decay on ``*.weight`` only)."""

    def __init__(self, params: dict[str, np.ndarray], weight_decay: float):
        self.m = {name: np.zeros_like(p) for name, p in params.items()}
        self.v = {name: np.zeros_like(p) for name, p in params.items()}
        self.step_count = 0
        self.weight_decay = weight_decay

    def step(self, params, grads, learning_rate: float, beta1=0.9, beta2=0.999, eps=1e-8) -> None:
        self.step_count += 1
        correction1 = 1 - beta1**self.step_count
        correction2 = 1 - beta2**self.step_count
        for name, param in params.items():
            grad = grads[name]
            self.m[name] = beta1 * self.m[name] + (1 - beta1) * grad
            self.v[name] = beta2 * self.v[name] + (1 - beta2) * grad * grad
            update = (self.m[name] / correction1) / (np.sqrt(self.v[name] / correction2) + eps)
            if name.endswith(".weight"):
                update = update + self.weight_decay * param
            param -= (learning_rate * update).astype(param.dtype)


def random_shift(images: np.ndarray, max_shift: int, rng: np.random.Generator) -> np.ndarray:
    """Moves each ``[N,28,28]`` uint8 digit by a random (dy, dx) in [-max_shift, max_shift], zero fill."""
    if max_shift == 0:
        return images
    n, h, w = images.shape
    padded = np.pad(images, ((0, 0), (max_shift, max_shift), (max_shift, max_shift)))
    offsets = rng.integers(0, 2 * max_shift + 1, size=(n, 2))
    rows = offsets[:, 0, None] + np.arange(h)  # [N, H]
    cols = offsets[:, 1, None] + np.arange(w)  # [N, W]
    return padded[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]


def accuracy(params, images_uint8: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(lenet.predict(params, mnist.to_tensor(images_uint8)) == labels))


def train(
    split: mnist.MnistSplit, config: TrainConfig, max_steps: int | None = None, progress: bool = True
) -> tuple[dict[str, np.ndarray], list[dict]]:
    """Runs the training; returns parameters and per-epoch history. ``max_steps`` cuts it short (tests)."""
    rng = np.random.default_rng(config.seed)
    params = lenet.init_parameters(rng)
    optimizer = Adam(params, config.weight_decay)
    n = len(split.train_images)
    steps_per_epoch = -(-n // config.batch_size)
    total_steps = steps_per_epoch * config.epochs if max_steps is None else max_steps
    history = []
    step = 0
    for epoch in range(config.epochs):
        order = rng.permutation(n)
        shifted = random_shift(split.train_images[order], config.max_shift, rng)
        labels = split.train_labels[order].astype(np.int64)
        losses = []
        bar = tqdm(range(steps_per_epoch), desc=f"epoch {epoch + 1}/{config.epochs}", disable=not progress)
        for batch in bar:
            if step >= total_steps:
                break
            cosine = 0.5 * (1 + np.cos(np.pi * step / total_steps))
            lr = config.final_learning_rate + (config.learning_rate - config.final_learning_rate) * cosine
            chunk = slice(batch * config.batch_size, (batch + 1) * config.batch_size)
            loss, grads, _ = lenet.loss_and_gradients(params, mnist.to_tensor(shifted[chunk]), labels[chunk])
            optimizer.step(params, grads, lr)
            losses.append(loss)
            step += 1
            if batch % 20 == 0:
                bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}", lr=f"{lr:.2e}")
        bar.close()
        record = {"epoch": epoch + 1, "mean_loss": float(np.mean(losses)) if losses else None}
        if max_steps is None:
            record["validation_accuracy"] = accuracy(params, split.validation_images, split.validation_labels)
            tqdm.write(f"epoch {epoch + 1}: loss {record['mean_loss']:.4f}, "
                       f"validation accuracy {record['validation_accuracy']:.4f}")  # fmt: skip
        history.append(record)
        if step >= total_steps:
            break
    return params, history


def add_training_arguments(parser: argparse.ArgumentParser, defaults) -> None:
    """The knobs both trainers (LeNet-5 here, mnist_vit in train_vit.py) take, defaulting to their config."""
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)


def environment_record() -> dict:
    """Where a training ran, for its record (models/*.json)."""
    return {
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
    }


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=DEFAULT_WEIGHTS, help="weights file (.npz)")
    cli_options.add_mnist_dir_argument(parser, "to train on")
    defaults = TrainConfig()
    add_training_arguments(parser, defaults)
    args = parser.parse_args(argv)
    config = TrainConfig(
        seed=args.seed, epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.learning_rate
    )
    split = mnist.load_split(args.mnist_dir)
    print(
        f"training LeNet-5 on {len(split.train_images)} digits, validating on {len(split.validation_images)}"
    )
    started = time.perf_counter()
    params, history = train(split, config)
    seconds = time.perf_counter() - started
    val_accuracy = accuracy(params, split.validation_images, split.validation_labels)
    train_accuracy = accuracy(params, split.train_images, split.train_labels)
    lenet.save_weights(args.output, params)
    record = {
        "weights": args.output.name,
        "weights_sha256": hashlib.sha256(args.output.read_bytes()).hexdigest(),
        "validation_accuracy": val_accuracy,
        "validation_errors": int(round((1 - val_accuracy) * len(split.validation_images))),
        "train_accuracy": train_accuracy,
        "train_size": len(split.train_images),
        "validation_size": len(split.validation_images),
        "split": f"dev digit i validates when i % {mnist.VALIDATION_EVERY} == {mnist.VALIDATION_EVERY - 1}",
        "data": f"{mnist.DEV_IMAGES_FILE}, {mnist.DEV_LABELS_FILE} (MNIST test split digits)",
        "preprocessing": "float32 pixel / 255.0, white digit on black, [1, 28, 28]",
        "config": asdict(config),
        "train_seconds": round(seconds, 1),
        "history": history,
        "environment": environment_record(),
        "command": "python -m trt_plugin_kit.models.train "
        + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    record_path = args.output.with_suffix(".json")
    record_path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"validation accuracy {val_accuracy:.4f} ({record['validation_errors']} errors), "
          f"train accuracy {train_accuracy:.4f}, {seconds:.0f} s")  # fmt: skip
    print(f"wrote {args.output} and {record_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Runs the command; missing or malformed input files end with one clear line and exit code 2."""
    return run_reporting_input_errors(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
