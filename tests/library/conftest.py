"""The library tier runs what `make plugins` built. `make test` builds it beside pytest (the other tiers need
no build and start at once): with $TRT_PLUGIN_KIT_BUILD_STATUS set, every test here first waits for that
build's exit status file, and fails, naming the build's log, if the build failed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

BUILD_STATUS_ENV = "TRT_PLUGIN_KIT_BUILD_STATUS"
BUILD_WAIT_S = 1800.0


@pytest.fixture(scope="session", autouse=True)
def plugin_build() -> None:
    status_file = os.environ.get(BUILD_STATUS_ENV)
    if not status_file:
        return  # a plain pytest: the build is whatever `make plugins` left
    status_file = Path(status_file)
    log = status_file.with_suffix(".log")
    deadline = time.monotonic() + BUILD_WAIT_S
    while not status_file.is_file():
        if time.monotonic() > deadline:
            pytest.fail(f"the plugin build beside pytest did not end within {BUILD_WAIT_S:.0f} s ({log})")
        time.sleep(0.5)
    status = status_file.read_text().strip()
    if status != "0":
        pytest.fail(f"the plugin build beside pytest failed (exit {status}): see {log}", pytrace=False)
