"""docker/wheelhouse/ has two owners (the compose test's wheels, make perf's perf_analyzer wheels): a new
compose wheelhouse removes only the wheels its stamp names, so a perf_analyzer wheel that make perf is
reading at that moment (make test runs both at once) stays."""

from __future__ import annotations

from trt_plugin_kit.deploy.wheelhouse import stale_wheels

PERF = "perf_analyzer-2.60.0-py3-none-manylinux_2_38_x86_64.whl"


def test_only_the_wheels_the_stamp_names_are_replaced():
    present = ["numpy-2.1.0-cp311.whl", PERF, "pillow-11.0.0-cp311.whl"]
    stamp = ["KEY", "numpy-2.1.0-cp311.whl", "pillow-11.0.0-cp311.whl", "gone-1.0-py3.whl"]
    assert stale_wheels(stamp, present) == ["numpy-2.1.0-cp311.whl", "pillow-11.0.0-cp311.whl"]


def test_no_stamp_removes_nothing_and_an_old_format_stamp_removes_everything():
    assert stale_wheels([], [PERF]) == []  # a fresh folder: perf_analyzer's wheel came first
    assert stale_wheels(["KEY"], [PERF, "numpy-2.1.0-cp311.whl"]) == [PERF, "numpy-2.1.0-cp311.whl"]
