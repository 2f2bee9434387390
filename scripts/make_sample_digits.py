#!/usr/bin/env python3
"""Writes the sample digit images of samples/digits/ from the MNIST dev data (deterministic).

    .venv/bin/python scripts/make_sample_digits.py [--output samples/digits] [--mnist-dir DIR]

* ``0.png`` .. ``9.png``: the first digit of each class in the validation split, exactly as stored in the
  IDX file (28x28, 8-bit grayscale, white digit on black). Clients, demos and ``build_engines.py --verify``
  use them; ``trt_plugin_kit.models.mnist.preprocess_image`` turns them back into the identical model input.
* ``wild/<label>_<description>.png``: real-world-style pictures made from other validation digits, to
  exercise the preprocessing: dark ink on light paper, larger sizes, RGB and RGBA, off-centre, noise. The file
  name starts with the true digit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

from trt_plugin_kit.interface import SAMPLES_DIR
from trt_plugin_kit.models import mnist
from trt_plugin_kit.tritonserver import options as cli_options

SEED = 5


def first_of_each_class(labels: np.ndarray, skip: int = 0) -> list[int]:
    """Index of the (skip+1)-th validation digit of each class 0..9."""
    return [int(np.flatnonzero(labels == digit)[skip]) for digit in range(10)]


def ink_on_paper(digit: np.ndarray, size: tuple[int, int], paper: int, ink: int, rng, margin: float = 0.15):
    """The digit as dark ``ink`` on light ``paper`` (grayscale float image of ``size`` = (width, height))."""
    width, height = size
    box = int(min(width, height) * (1 - 2 * margin))
    strokes = Image.fromarray(digit).resize((box, box), Image.Resampling.BICUBIC)
    strokes = strokes.filter(ImageFilter.GaussianBlur(radius=max(1.0, box / 120)))
    coverage = np.zeros((height, width))
    left, top = (width - box) // 2, (height - box) // 2
    coverage[top : top + box, left : left + box] = np.asarray(strokes, dtype=np.float64) / 255.0
    image = paper + (ink - paper) * coverage
    image += rng.normal(0.0, 4.0, size=image.shape)  # sensor noise
    return np.clip(image, 0, 255)


def shade(gray: np.ndarray, tint: tuple[float, float, float]) -> np.ndarray:
    """A grayscale picture as RGB with a colour cast (like a phone photo of paper)."""
    return np.clip(gray[..., None] * np.asarray(tint)[None, None, :], 0, 255).astype(np.uint8)


def make_wild(split: mnist.MnistSplit, rng: np.random.Generator) -> dict[str, Image.Image]:
    pick = first_of_each_class(split.validation_labels, skip=1)
    images = {}

    digit = split.validation_images[pick[7]]
    images["7_dark_on_light_rgb_200x200.png"] = Image.fromarray(
        shade(ink_on_paper(digit, (200, 200), paper=238, ink=30, rng=rng), (1.0, 0.97, 0.9)), mode="RGB"
    )

    digit = split.validation_images[pick[2]]
    gray = ink_on_paper(digit, (140, 180), paper=255, ink=0, rng=rng, margin=0.1)
    alpha = np.clip((255 - gray) * 1.4, 0, 255).astype(np.uint8)  # ink opaque, paper transparent
    rgba = np.dstack([np.full(gray.shape + (3,), 20, np.uint8), alpha])
    images["2_rgba_transparent_140x180.png"] = Image.fromarray(rgba, mode="RGBA")

    digit = split.validation_images[pick[5]]
    canvas = np.full((256, 256), 225.0)
    canvas[40:200, 100:240] = ink_on_paper(digit, (140, 160), paper=225, ink=60, rng=rng, margin=0.05)
    canvas += np.linspace(-12, 12, 256)[None, :]  # uneven lighting
    images["5_off_center_gray_paper_rgb_256x256.png"] = Image.fromarray(
        shade(np.clip(canvas, 0, 255), (0.95, 1.0, 1.0)), mode="RGB"
    )

    digit = split.validation_images[pick[3]]
    thick = np.asarray(Image.fromarray(digit).filter(ImageFilter.MaxFilter(3)))  # marker pen strokes
    images["3_thick_marker_gray_300x200.png"] = Image.fromarray(
        ink_on_paper(thick, (300, 200), paper=245, ink=15, rng=rng, margin=0.08).astype(np.uint8), mode="L"
    )
    return images


def write_samples(output: Path, data_dir: Path | None = None) -> list[Path]:
    split = mnist.load_split(data_dir)
    rng = np.random.default_rng(SEED)
    written = []
    output.mkdir(parents=True, exist_ok=True)
    for digit, index in enumerate(first_of_each_class(split.validation_labels)):
        path = output / f"{digit}.png"
        Image.fromarray(split.validation_images[index], mode="L").save(path, optimize=True)
        written.append(path)
    (output / "wild").mkdir(exist_ok=True)
    for name, image in make_wild(split, rng).items():
        path = output / "wild" / name
        image.save(path, optimize=True)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write samples/digits/ from the MNIST dev data.")
    parser.add_argument("--output", type=Path, default=SAMPLES_DIR)
    cli_options.add_mnist_dir_argument(parser, "to take the samples from")
    args = parser.parse_args(argv)
    for path in write_samples(args.output, args.mnist_dir):
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
