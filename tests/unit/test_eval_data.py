"""`eval` on the user's own labelled data, without a server: IDX files gzipped or not under any name, the
standard MNIST names in a folder, folders of labelled pictures, their errors, the shipped dev digits known by
content, and what the split line may claim about each."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from clients import cli
from clients.commands.evaluate import resolve_split, split_line, subset_text
from clients.errors import EXIT_BAD_INPUT, EXIT_USAGE, BadInputError, UsageError
from clients.inputs import encode_png, load_idx_pair, load_labelled_folder, load_mnist_dir
from trt_plugin_kit.models import mnist

CLOSED = "127.0.0.1:9"  # never reached: every case here fails (or is checked) before connecting


def write_idx(path: Path, array: np.ndarray, compress: bool = False, type_code: int = 0x08) -> Path:
    header = bytes([0, 0, type_code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    data = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    path.write_bytes(gzip.compress(data, compresslevel=1) if compress else data)
    return path


def small_set(count: int = 12, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (count, 28, 28), dtype=np.uint8), rng.integers(0, 10, count, dtype=np.uint8)


@pytest.fixture(scope="module")
def dev_set():
    return mnist.load_dev_set()


# ------------------------------------------------------------------------------------------- IDX


@pytest.mark.parametrize(
    "images_name, labels_name, compress",
    [
        ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", True),
        ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", False),
        ("t10k-images.idx3-ubyte", "t10k-labels.idx1-ubyte", False),  # the dotted spelling of some copies
        ("train-images-idx3-ubyte", "train-labels-idx1-ubyte.gz", None),  # one of each
    ],
)
def test_standard_names_are_found_and_read_gzipped_or_not(tmp_path, images_name, labels_name, compress):
    images, labels = small_set()
    write_idx(tmp_path / images_name, images, compress=bool(compress))
    write_idx(tmp_path / labels_name, labels, compress=compress is None or compress)
    found = mnist.find_labelled_files(tmp_path)
    assert (found.images.name, found.labels.name, found.dev_names) == (images_name, labels_name, False)
    data = load_mnist_dir(tmp_path)
    np.testing.assert_array_equal(data.digits, images)
    np.testing.assert_array_equal(data.labels, labels)
    assert data.labels.dtype == np.int64 and not data.shipped and data.mnist_dir == tmp_path


def test_gzip_is_told_by_content_not_by_name(tmp_path):
    images, labels = small_set()
    plain_named_gz = write_idx(tmp_path / "plain.gz", images, compress=False)
    gzipped_named_plain = write_idx(tmp_path / "labels.idx1-ubyte", labels, compress=True)
    read_images, read_labels = mnist.load_labelled_idx(plain_named_gz, gzipped_named_plain)
    np.testing.assert_array_equal(read_images, images)
    np.testing.assert_array_equal(read_labels, labels)


def test_the_search_order_dev_then_t10k_then_train(tmp_path):
    images, labels = small_set()
    for prefix in ("train", "t10k"):
        write_idx(tmp_path / f"{prefix}-images-idx3-ubyte.gz", images, compress=True)
        write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte.gz", labels, compress=True)
    assert mnist.find_labelled_files(tmp_path).images.name == "t10k-images-idx3-ubyte.gz"
    write_idx(tmp_path / mnist.DEV_IMAGES_FILE, images, compress=True)
    write_idx(tmp_path / mnist.DEV_LABELS_FILE, labels, compress=True)
    found = mnist.find_labelled_files(tmp_path)
    assert found.images.name == mnist.DEV_IMAGES_FILE and found.dev_names


def test_missing_or_half_sets_are_refused_naming_what_was_looked_for(tmp_path):
    with pytest.raises(mnist.MnistDataMissing) as missing:
        mnist.find_labelled_files(tmp_path)
    for name in (mnist.DEV_IMAGES_FILE, "t10k-images-idx3-ubyte[.gz]", "train-labels-idx1-ubyte[.gz]"):
        assert name in str(missing.value)
    images, labels = small_set()
    write_idx(tmp_path / "t10k-images-idx3-ubyte", images)
    write_idx(tmp_path / "train-images-idx3-ubyte", images)  # a complete train pair is not taken instead
    write_idx(tmp_path / "train-labels-idx1-ubyte", labels)
    with pytest.raises(mnist.MnistDataMissing, match="t10k-images-idx3-ubyte is there but not its partner"):
        mnist.find_labelled_files(tmp_path)
    write_idx(tmp_path / mnist.DEV_LABELS_FILE, labels, compress=True)
    with pytest.raises(mnist.MnistDataMissing, match=f"has no {mnist.DEV_IMAGES_FILE}"):
        mnist.find_labelled_files(tmp_path)
    with pytest.raises(BadInputError, match="--image-folder DIR"):  # the clients add the other ways
        load_mnist_dir(tmp_path)


def test_idx_pair_errors(tmp_path):
    images, labels = small_set(5)
    good_images = write_idx(tmp_path / "images", images)
    good_labels = write_idx(tmp_path / "labels", labels)
    with pytest.raises(mnist.IdxFormatError, match="5 images but 4 labels"):
        mnist.load_labelled_idx(good_images, write_idx(tmp_path / "four", labels[:4]))
    with pytest.raises(mnist.IdxFormatError, match=r"an IDX labels file\?"):
        mnist.load_labelled_idx(good_labels, good_images)
    with pytest.raises(mnist.IdxFormatError, match=r"an IDX images file\?"):
        mnist.load_labelled_idx(good_images, good_images)
    wide = write_idx(tmp_path / "int32", images.astype(np.int32), type_code=0x0C)
    with pytest.raises(mnist.IdxFormatError, match="expected uint8 images"):
        mnist.load_labelled_idx(wide, good_labels)
    with pytest.raises(mnist.IdxFormatError, match=r"\[N, 28, 28\]"):
        mnist.load_labelled_idx(write_idx(tmp_path / "small", images[:, :14, :14]), good_labels)
    (tmp_path / "text").write_bytes(b"P5 28 28 255\n")
    with pytest.raises(mnist.IdxFormatError, match="magic"):
        mnist.load_labelled_idx(tmp_path / "text", good_labels)
    # The clients' own messages (exit code 7).
    with pytest.raises(BadInputError, match="not an MNIST IDX file: .*5 images but 4 labels"):
        load_idx_pair(good_images, tmp_path / "four")
    with pytest.raises(BadInputError, match="nothing: no such file"):
        load_idx_pair(good_images, tmp_path / "nothing")
    with pytest.raises(BadInputError, match="a folder, not an IDX file"):
        load_idx_pair(tmp_path, good_labels)
    with pytest.raises(BadInputError, match="no images"):
        load_idx_pair(write_idx(tmp_path / "none", images[:0]), write_idx(tmp_path / "nolab", labels[:0]))


# ------------------------------------------------------------------------- the shipped dev digits


def test_the_shipped_dev_digits_are_known_by_content(tmp_path, dev_set):
    images, labels = dev_set
    assert mnist.is_shipped_dev_set(images, labels)
    assert not mnist.is_shipped_dev_set(images[:200], labels[:200])
    assert not mnist.is_shipped_dev_set(images, (labels + 1) % 10)
    # Rewritten uncompressed under the standard names, they are still the dev digits (and split as such).
    write_idx(tmp_path / "t10k-images-idx3-ubyte", images)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", labels)
    data = load_mnist_dir(tmp_path)
    assert data.shipped and not data.dev_names
    assert resolve_split(data, None) == "validation"
    # Other data under the dev names is not.
    write_idx(tmp_path / mnist.DEV_IMAGES_FILE, images[:40], compress=True)
    write_idx(tmp_path / mnist.DEV_LABELS_FILE, labels[:40], compress=True)
    other = load_mnist_dir(tmp_path)
    assert other.dev_names and not other.shipped


def test_dev_digit_overlap_counts_training_and_held_out_digits(dev_set):
    images, _ = dev_set
    assert mnist.dev_digit_overlap(images[:200]) == mnist.DevOverlap(train=175, validation=25)
    assert mnist.dev_digit_overlap(images[7::8][:30]) == mnist.DevOverlap(train=0, validation=30)
    assert mnist.dev_digit_overlap(small_set(20)[0]) == mnist.DevOverlap(train=0, validation=0)


def test_dev_digit_overlap_says_nothing_without_the_shipped_digits(tmp_path):
    images, labels = small_set()
    assert mnist.dev_digit_overlap(images, tmp_path) is None
    write_idx(tmp_path / mnist.DEV_IMAGES_FILE, images, compress=True)
    write_idx(tmp_path / mnist.DEV_LABELS_FILE, labels, compress=True)
    assert mnist.dev_digit_overlap(images, tmp_path) is None  # dev names, other digits


# ----------------------------------------------------------------------------- labelled picture folders


def make_folder(root: Path, digits: np.ndarray, labels: np.ndarray) -> list[Path]:
    paths = []
    for i, (digit, label) in enumerate(zip(digits, labels, strict=True)):
        folder = root / str(int(label))
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / (f"{i:02d}.png" if i % 3 else f"{i:02d}.JPG")
        if i % 3:
            Image.fromarray(digit).save(path)
        else:  # a bigger, dark-on-light JPEG
            Image.fromarray(255 - np.kron(digit, np.ones((3, 3), np.uint8))).save(path, format="JPEG")
        paths.append(path)
    return paths


def test_a_labelled_folder_reads_back(tmp_path, dev_set):
    digits, labels = dev_set[0][7::8][:12], dev_set[1][7::8][:12]
    paths = make_folder(tmp_path / "mine", digits, labels)
    (tmp_path / "mine" / "README.txt").write_text("my digits")  # beside the label folders: ignored
    (tmp_path / "mine" / "3" / ".DS_Store").write_bytes(b"\0")  # hidden: ignored
    files = mnist.labelled_image_files(tmp_path / "mine")
    expected = sorted(zip(paths, labels.tolist(), strict=True), key=lambda item: (item[1], item[0].name))
    assert files == expected
    tensors, read_labels = mnist.load_image_folder(tmp_path / "mine")
    assert tensors.shape == (12, 1, 28, 28) and tensors.dtype == np.float32
    np.testing.assert_array_equal(read_labels, [label for _, label in expected])
    for (path, _), tensor in zip(expected, tensors, strict=True):
        np.testing.assert_array_equal(tensor, mnist.preprocess_image(path))
        if path.suffix == ".png":  # a 28x28 MNIST digit stays exactly itself
            original = np.asarray(Image.open(path))
            np.testing.assert_array_equal(tensor, mnist.to_tensor(original))
    # The clients: the files as they are for mnist_pipeline, the server's preprocessing for --raw.
    data = load_labelled_folder(tmp_path / "mine")
    assert data.is_folder and not data.shipped and len(data) == 12
    np.testing.assert_array_equal(data.raw_batch(0, 12), tensors)
    assert [row[0] for row in data.encoded_batch(0, 2)] == [path.read_bytes() for path, _ in expected[:2]]
    pngs = [i for i, (path, _) in enumerate(expected) if path.suffix == ".png"]
    assert mnist.dev_digit_overlap(data.subset(np.array(pngs)).as_mnist_digits()).validation == len(pngs)


def test_labelled_folder_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such folder"):
        mnist.labelled_image_files(tmp_path / "absent")
    (tmp_path / "file.png").write_bytes(b"")
    with pytest.raises(mnist.LabelledFolderError, match="not a folder"):
        mnist.labelled_image_files(tmp_path / "file.png")
    empty = tmp_path / "empty"
    (empty / "4").mkdir(parents=True)
    with pytest.raises(mnist.LabelledFolderError, match="no pictures"):
        mnist.labelled_image_files(empty)
    messy = tmp_path / "messy"
    for name in ("1", "10", "cats"):
        (messy / name).mkdir(parents=True)
    Image.new("L", (28, 28)).save(messy / "1" / "a.png")
    (messy / "1" / "notes.txt").write_text("?")
    (messy / "1" / "nested").mkdir()
    Image.new("L", (28, 28)).save(messy / "loose.png")
    with pytest.raises(mnist.LabelledFolderError) as error:
        mnist.labelled_image_files(messy)
    message = str(error.value)
    for part in (
        "pictures outside a label folder (loose.png)",
        "10: not a label folder",
        "cats: not a label",
    ):
        assert part in message
    assert "notes.txt: not a .png/.jpg/.jpeg file" in message and "nested: not a" in message
    blank = tmp_path / "blank"
    (blank / "0").mkdir(parents=True)
    Image.new("L", (28, 28), 0).save(blank / "0" / "black.png")  # no digit
    (blank / "0" / "broken.png").write_bytes(b"\x89PNG not really")
    with pytest.raises(mnist.LabelledFolderError, match="2 of 2 pictures are not usable"):
        mnist.load_image_folder(blank)
    with pytest.raises(BadInputError, match="1 of 2 inputs are not usable images"):
        load_labelled_folder(blank)
    (blank / "0" / "broken.png").unlink()
    with pytest.raises(BadInputError, match=r"(?s)1 image\(s\) cannot be preprocessed.*black.png: "):
        load_labelled_folder(blank)  # named before anything is sent
    with pytest.raises(BadInputError, match="(?s)--image-folder .*10: not a label folder"):
        load_labelled_folder(messy)


# --------------------------------------------------------------------------------- what eval claims


def test_the_split_and_its_wording(tmp_path, dev_set):
    images, labels = dev_set
    shipped = load_idx_pair(
        write_idx(tmp_path / "a", images, compress=True), write_idx(tmp_path / "b", labels, compress=True)
    )
    assert resolve_split(shipped, None) == "validation" and resolve_split(shipped, "train") == "train"
    assert subset_text(shipped, "validation", None) == "validation split"
    assert split_line(shipped, "validation", 8000, 1000, None) == (
        "split: validation (held out from training: the figure to expect on new digits)"
    )
    assert split_line(shipped, "all", 8000, 8000, None) == (
        "split: all (7 in 8 of them trained the model: higher than on new digits)"
    )

    own = load_idx_pair(
        write_idx(tmp_path / "t10k-images-idx3-ubyte", images[:200]),
        write_idx(tmp_path / "t10k-labels-idx1-ubyte", labels[:200]),
    )
    assert resolve_split(own, None) == "all" and resolve_split(own, "all") == "all"
    with pytest.raises(UsageError, match="--split validation applies only to the MNIST dev digits"):
        resolve_split(own, "validation")
    assert subset_text(own, "all", 50) == "your data, first 50"
    overlap = mnist.dev_digit_overlap(own.digits)
    assert split_line(own, "all", 200, 200, overlap) == (
        "split: all 200 digits of t10k-images-idx3-ubyte (your data; 175 of them are dev digits the model "
        "was trained on: expect a higher figure than on new digits)"
    )
    assert split_line(own, "all", 200, 50, mnist.DevOverlap(0, 0)) == (
        "split: first 50 of the 200 digits of t10k-images-idx3-ubyte (your data)"
    )
    assert (
        split_line(own, "all", 200, 200, None)
        == "split: all 200 digits of t10k-images-idx3-ubyte (your data)"
    )

    dev_named = load_idx_pair(
        write_idx(tmp_path / mnist.DEV_IMAGES_FILE, images[:40], compress=True),
        write_idx(tmp_path / mnist.DEV_LABELS_FILE, labels[:40], compress=True),
    )
    assert dev_named.dev_names and not dev_named.shipped
    assert resolve_split(dev_named, None) == "all"  # no longer cut to one digit in eight unasked
    assert resolve_split(dev_named, "validation") == "validation"  # the layout `train --mnist-dir` splits
    line = split_line(dev_named, "validation", 40, 5, None)
    assert line.startswith(f"split: validation (digits i % 8 == 7 of your {mnist.DEV_IMAGES_FILE}, not the")
    assert "held out from training only if the model was trained on these very files" in line


def test_subset_keeps_digits_and_labels_together(tmp_path):
    images, labels = small_set(10)
    data = load_idx_pair(write_idx(tmp_path / "i", images), write_idx(tmp_path / "l", labels))
    part = data.subset(np.array([7, 2]))
    np.testing.assert_array_equal(part.labels, labels[[7, 2]])
    np.testing.assert_array_equal(part.raw_batch(0, 2), mnist.to_tensor(images[[7, 2]]))
    assert part.encoded_batch(1, 2)[0, 0] == encode_png(images[2])


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["--images", "x"], EXIT_USAGE, "--images and --labels go together"),
        (["--labels", "x"], EXIT_USAGE, "--images and --labels go together"),
        (
            ["--images", "x", "--labels", "y", "--mnist-dir", "d"],
            EXIT_USAGE,
            "one source of digits at a time",
        ),
        (["--image-folder", "d", "--mnist-dir", "d"], EXIT_USAGE, "one source of digits at a time"),
        (
            ["--image-folder", "d", "--split", "train"],
            EXIT_USAGE,
            "--split train applies only to the MNIST dev",
        ),
        (["--images", "x", "--labels", "y"], EXIT_BAD_INPUT, "x: no such file"),
        (["--image-folder", "nowhere"], EXIT_BAD_INPUT, "--image-folder nowhere: no such folder"),
    ],
)
def test_eval_flags_are_checked_before_connecting(args, code, message, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["eval", "--url", CLOSED, "--retries", "0", *args]) == code
    assert message in capsys.readouterr().err
