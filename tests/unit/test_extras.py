"""The optional dependencies keep each other's pins (issue 40, item 5): installing the torch extra replaced
the plugin build's triton==3.6.0 with the newest torch's 3.9.0."""

from __future__ import annotations

import re

import tomllib

from trt_plugin_kit.interface import REPO_ROOT

EXTRAS = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def test_the_torch_extra_carries_the_triton_pin_of_the_build():
    assert EXTRAS["triton"] == ["triton==3.6.0"]
    assert "trt-plugin-kit[triton]" in EXTRAS["torch"]  # the pin from its one home, not a copy


def test_make_torch_cpu_takes_torch_from_pytorchs_cpu_index_then_the_extra():
    makefile = (REPO_ROOT / "Makefile").read_text()
    recipe = re.search(r"^torch-cpu: venv\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe, "make torch-cpu is gone"
    lines = recipe.group(1).splitlines()
    assert "--index-url $(TORCH_CPU_INDEX) 'torch>=2.6'" in lines[0]
    assert "-e '.[dev,torch]'" in lines[1]
    assert "TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu" in makefile
