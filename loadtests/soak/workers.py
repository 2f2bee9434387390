"""The soak's threads: workers that send good and bad requests and count what came back (`Tally`), and the
sampler of the server's memory and Prometheus counters; `run_load` drives them for the soak's duration.

Each answer is judged by a function of the answer alone (`judge_bad`, `good_failure`), testable without a
server."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from tritonclient.utils import InferenceServerException

from loadtests.soak.requests import BadRequest
from loadtests.workloads import PROTOCOLS, TritonTask
from trt_plugin_kit.tritonserver.metrics import REQUEST_FAILURE, REQUEST_SUCCESS, read_metrics
from trt_plugin_kit.tritonserver.options import ServerLocation
from trt_plugin_kit.tritonserver.protocol import Connection

METRICS = (REQUEST_SUCCESS, REQUEST_FAILURE)
MIB = 1024.0 * 1024.0
FIRST_FAILURES_KEPT = 50
ACCEPTED = "accepted (must be refused)"


@dataclass(frozen=True)
class BadVerdict:
    refused_clearly: bool  # refused with an error that names the problem
    accepted: bool  # answered as if it were good
    message: str  # what went wrong ("" when refused clearly)


def judge_bad(protocol: str, request: BadRequest, error: Exception | None) -> BadVerdict:
    """How the server answered a bad request: `error` is what the call raised, None when it was answered."""
    if error is None:
        return BadVerdict(False, True, f"{protocol} {request.label}: {ACCEPTED}")
    if isinstance(error, InferenceServerException):
        text = str(error)
        if request.fragment.lower() in text.lower():
            return BadVerdict(True, False, "")
        return BadVerdict(
            False, False, f"{protocol} {request.label}: refused without naming the problem: {text[:300]}"
        )
    # A broken connection is a failed check too.
    return BadVerdict(False, False, f"{protocol} {request.label}: {type(error).__name__}: {error}")


def good_failure(protocol: str, task: TritonTask, error: Exception) -> str:
    """The message of a good request that failed: the server refused it (InferenceServerException), its answer
    was wrong (ResponseCheckError) or the path broke (any other exception)."""
    return f"{protocol} {task!r}: {type(error).__name__}: {str(error)[:300]}"


@dataclass
class Tally:
    """What the workers observed; shared between threads, guarded by `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    good_ok: Counter = field(default_factory=Counter)  # (protocol, model) -> count
    good_failed: Counter = field(default_factory=Counter)
    bad_refused: Counter = field(default_factory=Counter)  # (protocol, label) -> count
    bad_wrong: Counter = field(default_factory=Counter)  # accepted, or refused without naming the problem
    bad_accepted: Counter = field(default_factory=Counter)  # of those: answered as if good
    latencies: dict = field(default_factory=lambda: defaultdict(list))  # model -> [seconds] (good requests)
    failures: list = field(default_factory=list)  # first messages
    events: list = field(default_factory=list)  # (finished at, good?, ok?, seconds) for the time series

    def add_bad(self, protocol: str, label: str, verdict: BadVerdict, at: float) -> None:
        with self.lock:
            (self.bad_refused if verdict.refused_clearly else self.bad_wrong)[(protocol, label)] += 1
            if verdict.accepted:
                self.bad_accepted[(protocol, label)] += 1
            self.events.append((at, False, verdict.refused_clearly, 0.0))
            self._note(verdict.message)

    def add_good(self, protocol: str, model: str, seconds: float, failure: str, at: float) -> None:
        with self.lock:
            (self.good_failed if failure else self.good_ok)[(protocol, model)] += 1
            self.events.append((at, True, not failure, seconds))
            if failure:
                self._note(failure)
            else:
                self.latencies[model].append(seconds)

    def _note(self, message: str) -> None:
        if message and len(self.failures) < FIRST_FAILURES_KEPT:
            self.failures.append(message)

    def totals(self) -> dict[str, int]:
        with self.lock:
            return {
                "good_ok": sum(self.good_ok.values()),
                "good_failed": sum(self.good_failed.values()),
                "bad_refused": sum(self.bad_refused.values()),
                "bad_wrong": sum(self.bad_wrong.values()),
            }


@dataclass(frozen=True)
class Mix:
    """What every worker sends: over which protocols (by weight), which good tasks and bad requests, the
    share of bad ones, with which client timeout, from which seed."""

    protocols: dict[str, int]
    tasks: list[TritonTask]
    bad: list[BadRequest]
    bad_share: float
    timeout_s: float
    seed: int


class Worker:
    """One client thread: a connection per protocol, then requests chosen at random (seeded) until `stop`:
    a `bad_share` of them bad on purpose, the rest good, every answer judged and counted in `tally`. At most
    `rate` requests per second when given (a request starts on its schedule, or at once when late), else
    each as soon as the last was answered."""

    def __init__(
        self,
        index: int,
        location: ServerLocation,
        mix: Mix,
        tally: Tally,
        clock: Callable[[], float],
        rate: float | None = None,
    ) -> None:
        self.index, self.location, self.mix, self.tally, self.clock = index, location, mix, tally, clock
        self.interval_s = 1.0 / rate if rate else 0.0

    def send_bad(self, client: Connection, protocol: str, request: BadRequest) -> None:
        try:
            client.infer(request.model, request.inputs)
            error = None
        except Exception as raised:  # noqa: BLE001 - every failure is judged, none ends the worker
            error = raised
        self.tally.add_bad(protocol, request.label, judge_bad(protocol, request, error), self.clock())

    def send_good(self, client: Connection, protocol: str, task: TritonTask) -> None:
        inputs = task.make_inputs()
        started = time.perf_counter()
        try:
            outputs = client.infer(task.model, inputs, task.output_names)
            elapsed = time.perf_counter() - started
            task.check(inputs, outputs)
            failure = ""
        except Exception as error:  # noqa: BLE001 - any failure of a good request is counted
            elapsed = time.perf_counter() - started
            failure = good_failure(protocol, task, error)
        self.tally.add_good(protocol, task.model, elapsed, failure, self.clock())

    def run(self, stop: threading.Event) -> None:
        mix = self.mix
        rng = random.Random(mix.seed * 1000 + self.index)
        random.seed(mix.seed * 1000 + self.index)  # the task pools pick their batch slices with `random`
        protocols = [p for p in PROTOCOLS if mix.protocols[p] > 0]
        weights = [mix.protocols[p] for p in protocols]
        clients = {p: Connection(p, self.location.address(p), mix.timeout_s) for p in protocols}
        next_start = time.monotonic()
        try:
            while not stop.is_set():
                if self.interval_s:  # on schedule, or at once when late (no catching up in a burst)
                    wait = next_start - time.monotonic()
                    if wait > 0 and stop.wait(wait):
                        break
                    next_start = max(next_start, time.monotonic()) + self.interval_s
                (protocol,) = rng.choices(protocols, weights)
                if rng.random() < mix.bad_share:
                    self.send_bad(clients[protocol], protocol, rng.choice(mix.bad))
                else:
                    self.send_good(clients[protocol], protocol, rng.choice(mix.tasks))
        finally:
            for client in clients.values():
                client.close()


class Sampler:
    """Every `interval_s`: the server's resident memory (`rss`: the process tree's, or None), Triton's request
    counters and the tally's totals, appended to `samples`."""

    def __init__(
        self,
        rss: Callable[[], tuple[float, float, int] | None],
        metrics_url: str,
        interval_s: float,
        tally: Tally,
        clock: Callable[[], float],
    ) -> None:
        self.rss, self.metrics_url, self.interval_s = rss, metrics_url, interval_s
        self.tally, self.clock = tally, clock
        self.samples: list[dict] = []

    def sample(self) -> dict:
        sample: dict = {"t": round(self.clock(), 2)}
        rss = self.rss()
        if rss is not None:
            sample["server_rss_mib"] = round(rss[0] / MIB, 2)
            sample["total_rss_mib"] = round(rss[1] / MIB, 2)
            sample["processes"] = rss[2]
        try:
            sample["metrics"] = read_metrics(self.metrics_url, METRICS)
        except OSError as error:
            sample["metrics_error"] = str(error)
        sample.update(self.tally.totals())
        return sample

    def run(self, stop: threading.Event) -> None:
        while True:
            self.samples.append(self.sample())
            if stop.wait(self.interval_s):
                break


def progress_line(elapsed: float, totals: dict[str, int], samples: list[dict]) -> str:
    rss = samples[-1].get("total_rss_mib", "?") if samples else "?"
    return (
        f"soak: {elapsed:5.0f} s  good ok {totals['good_ok']}  good failed {totals['good_failed']}  "
        f"bad refused {totals['bad_refused']}  bad wrong {totals['bad_wrong']}  server RSS {rss} MiB"
    )


def run_load(
    workers: list[Worker],
    sampler: Sampler,
    duration_s: float,
    join_timeout_s: float,
    clock: Callable[[], float],
    progress_every_s: float = 60.0,
) -> float:
    """Runs the sampler and the workers for `duration_s` (or until Ctrl-C), a progress line every
    `progress_every_s`; returns the seconds the load ran. Every thread has stopped when it returns."""
    stop = threading.Event()
    threads = [threading.Thread(target=sampler.run, args=(stop,), daemon=True)]
    threads += [threading.Thread(target=worker.run, args=(stop,), daemon=True) for worker in workers]
    for thread in threads:
        thread.start()
    try:
        next_report = progress_every_s
        while clock() < duration_s:
            time.sleep(min(1.0, max(0.0, duration_s - clock())))
            if clock() >= next_report:
                next_report += progress_every_s
                print(progress_line(clock(), sampler.tally.totals(), sampler.samples), flush=True)
    except KeyboardInterrupt:
        print("soak: interrupted; writing what was measured", flush=True)
    stop.set()
    load_seconds = clock()
    for thread in threads:
        thread.join(timeout=join_timeout_s)
    return load_seconds
