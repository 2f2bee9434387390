"""The builder's progress: a ``trt.IProgressMonitor`` that draws one tqdm bar per builder phase."""

from __future__ import annotations

import threading


def make_progress_monitor(trt):
    """A trt.IProgressMonitor drawing one tqdm bar per builder phase (nested phases indented)."""
    from tqdm import tqdm

    class TqdmProgressMonitor(trt.IProgressMonitor):
        def __init__(self):
            trt.IProgressMonitor.__init__(self)
            self.bars = {}
            self.lock = threading.Lock()  # TensorRT may report from several builder threads

        def phase_start(self, phase_name, parent_phase, num_steps):
            with self.lock:
                self._start(phase_name, parent_phase, num_steps)

        def _start(self, phase_name, parent_phase, num_steps):
            depth = 0
            parent = parent_phase
            while parent in self.bars:
                depth += 1
                parent = self.bars[parent][1]
            bar = tqdm(total=num_steps, desc="  " * depth + phase_name, position=depth, leave=depth == 0)
            self.bars[phase_name] = (bar, parent_phase)

        def step_complete(self, phase_name, step):
            with self.lock:
                if phase_name in self.bars:
                    bar = self.bars[phase_name][0]
                    bar.update(step + 1 - bar.n)
            return True  # keep building

        def phase_finish(self, phase_name):
            with self.lock:
                bar, _ = self.bars.pop(phase_name, (None, None))
            if bar is not None:
                bar.update(bar.total - bar.n)
                bar.close()

    return TqdmProgressMonitor()
