"""The NumPy cross-check of GPU harness dumps (trt_plugin_kit.specs.harness_dumps), on dumps written here in
the harness's format: exact references pass, a corrupted output fails, and a cancelling average is judged
against the magnitude of its terms."""

import json

import numpy as np
import pytest

from trt_plugin_kit.specs import harness_dumps, reference


def _write_case(directory, index, plugin, fields, inputs, outputs, tolerance):
    for i, x in enumerate(inputs):
        np.save(directory / f"case{index}_in{i}.npy", x)
    for o, y in enumerate(outputs):
        np.save(directory / f"case{index}_out{o}.npy", y)
    meta = {
        "plugin": plugin,
        "label": f"case {index}",
        "tolerance": tolerance,
        "inputs": len(inputs),
        "outputs": len(outputs),
        "fields": fields,
    }
    (directory / f"case{index}.json").write_text(json.dumps(meta))


@pytest.mark.numeric
def test_exact_outputs_pass_and_a_corrupted_one_fails(tmp_path):
    """The check recomputes the references in this process: the same float64 BLAS calls as the dumps' (the
    FullyConnected case), so the only difference is the float16 rounding of the dump, 2^-11 relative, four
    times under its tolerance, whatever a BLAS does to float64's last bits."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, size=(3, 5, 7)).astype(np.float32)
    y = reference.l2_normalize(x, 1).astype(np.float32)
    _write_case(tmp_path, 0, "L2Normalize", {"axis": [1], "eps": [1e-12]}, [x], [y], 1e-5)
    w = rng.uniform(-0.1, 0.1, size=(4 * 6,)).astype(np.float32)
    xf = rng.uniform(-1, 1, size=(2, 6)).astype(np.float16)
    yf = reference.fully_connected(xf.astype(np.float64), w, None, 4).astype(np.float16)
    _write_case(tmp_path, 1, "FullyConnected", {"weights": w.tolist(), "num_outputs": [4]}, [xf], [yf], 2e-3)
    passed, failed, _ = harness_dumps.check_dir(tmp_path)
    assert (passed, failed) == (2, 0)

    y_bad = y.copy()
    y_bad[1, 2, 3] *= 1.001
    _write_case(tmp_path, 0, "L2Normalize", {"axis": [1], "eps": [1e-12]}, [x], [y_bad], 1e-5)
    passed, failed, lines = harness_dumps.check_dir(tmp_path)
    assert (passed, failed) == (1, 1)
    assert lines[0].startswith("FAIL numpy L2Normalize")
    assert harness_dumps.main([str(tmp_path)]) == 1


def test_average_pool_error_is_relative_to_the_window_magnitude(tmp_path):
    # A window whose values cancel: a float32 rounding error is tiny next to |x|, huge next to the result.
    x = np.array([[[[1.0, -1.0], [0.5, -0.5 + 1e-7]]]], dtype=np.float32)
    fields = {
        "mode": "average",
        "kernel": [2, 2],
        "stride": [2, 2],
        "padding": [0, 0],
        "count_include_pad": [0],
    }
    exact = reference.pool(x.astype(np.float64), "average", [2, 2], [2, 2])
    got = (exact + 1e-8).astype(np.float32)
    _write_case(tmp_path, 0, "Pool", fields, [x], [got], 1e-5)
    assert harness_dumps.check_dir(tmp_path)[:2] == (1, 0)


def test_int8_pool_is_compared_in_units(tmp_path):
    x = np.arange(-8, 8, dtype=np.int8).reshape(1, 1, 4, 4)
    fields = {"mode": "max", "kernel": [2, 2], "stride": [2, 2], "input_scale": [0.5], "output_scale": [0.25]}
    y = reference.pool(x, "max", [2, 2], [2, 2], input_scale=0.5, output_scale=0.25)
    off_by_two = y.copy()
    off_by_two[0, 0, 0, 0] += 2
    _write_case(tmp_path, 0, "Pool", fields, [x], [y], 1)
    _write_case(tmp_path, 1, "Pool", fields, [x], [off_by_two], 1)
    assert harness_dumps.check_dir(tmp_path)[:2] == (1, 1)
