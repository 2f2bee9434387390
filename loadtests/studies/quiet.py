"""A quiet machine before each measured run: other work on the cores lowers the figures, so a study waits for
it to pass and notes how busy the machine still was (the `busy` column of its tables)."""

from __future__ import annotations

import time
from pathlib import Path


def cpu_busy_percent(seconds: float = 2.0) -> float | None:
    """Share of all cores busy over `seconds` (from /proc/stat). Sampled while the server under test is
    idle, just before a run, it shows how much other work the machine was doing."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields), idle

    try:
        total_before, idle_before = sample()
        time.sleep(seconds)
        total_after, idle_after = sample()
    except (OSError, ValueError, IndexError):
        return None
    elapsed = total_after - total_before
    return 100.0 * (1 - (idle_after - idle_before) / elapsed) if elapsed > 0 else None


def wait_until_quiet(max_busy_percent: float, max_wait_s: float) -> float | None:
    """Waits (up to max_wait_s) for the machine's CPU use to fall to max_busy_percent, so that other work
    does not eat into the figures; returns the last CPU use seen (reported next to the run's figures)."""
    deadline = time.monotonic() + max_wait_s
    while True:
        busy = cpu_busy_percent()
        if busy is None or busy <= max_busy_percent or time.monotonic() >= deadline:
            return busy
