"""tritonserver behind the edge: its private sockets, the models it serves, whether they still answer.

tritonserver listens on Unix sockets only (``--http-address=unix:DIR/http`` etc., DIR mode 0700) and, where
the platform allows, inside a network namespace of its own: it has no TCP port at all, and the edge is
the one process that talks to it. The models' interfaces are read from it once at start; requests are
held against those (trt_plugin_kit.serving.edge.tensors), never against what a client claims.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import aiohttp

from trt_plugin_kit.interface import ADMIN_HEADER, GRPC_ADMIN_HEADER
from trt_plugin_kit.serving.edge import limits
from trt_plugin_kit.serving.edge.contract import socket_paths
from trt_plugin_kit.serving.edge.tensors import ModelInterface, probe_request
from trt_plugin_kit.serving.edge.upstream_http import UpstreamHTTP
from trt_plugin_kit.serving.edge.wire_binary import HEADER_LENGTH, encode_binary_request

log = logging.getLogger("trt_plugin_kit.serving.edge")


class Upstream:
    """Connections to the private tritonserver, the served models, and their health."""

    def __init__(self, socket_dir: Path, internal_admin_key: str):
        self.paths = socket_paths(Path(socket_dir))
        self.internal_admin_key = internal_admin_key
        self.models: dict[str, ModelInterface] = {}
        self.unhealthy: dict[str, str] = {}  # model -> why
        self.session: aiohttp.ClientSession | None = None
        self.metrics_session: aiohttp.ClientSession | None = None
        # Every request of a client goes through this one (lean: it is paid per request); aiohttp's session
        # above serves the few the edge makes itself (start, health probes).
        self.http = UpstreamHTTP(self.paths["http"])
        self._failures: dict[str, int] = {}
        self._probing: set[str] = set()
        self.slow: dict[str, str] = {}  # model -> what its last probe found: busy, not down
        self.on_model_down = None  # callback(model, reason), set by the edge

    @property
    def admin_headers(self) -> dict[str, str]:
        return {ADMIN_HEADER: self.internal_admin_key}

    @property
    def grpc_admin_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((GRPC_ADMIN_HEADER, self.internal_admin_key),)

    async def open(self) -> None:
        timeout = aiohttp.ClientTimeout(total=limits.UPSTREAM_TIMEOUT_S, sock_connect=5)
        self.session = aiohttp.ClientSession(
            connector=aiohttp.UnixConnector(path=self.paths["http"], limit=0),
            timeout=timeout,
            auto_decompress=False,
            skip_auto_headers=("Accept-Encoding", "User-Agent"),
        )
        self.metrics_session = aiohttp.ClientSession(
            connector=aiohttp.UnixConnector(path=self.paths["metrics"], limit=4),
            timeout=timeout,
            skip_auto_headers=("User-Agent",),
        )

    async def close(self) -> None:
        self.http.close()
        for session in (self.session, self.metrics_session):
            if session is not None:
                await session.close()

    async def load_models(self, timeout_s: float) -> None:
        """Wait for tritonserver to be ready, then read every loaded model's configuration."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                async with self.session.get("http://triton/v2/health/ready") as response:
                    if response.status == 200:
                        break
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"tritonserver was not ready within {timeout_s:.0f} s")
            await asyncio.sleep(0.25)
        async with self.session.post(
            "http://triton/v2/repository/index", json={"ready": True}, headers=self.admin_headers
        ) as response:
            response.raise_for_status()
            index = await response.json()
        for entry in index:
            if entry.get("state") != "READY":
                continue
            async with self.session.get(f"http://triton/v2/models/{entry['name']}/config") as response:
                response.raise_for_status()
                interface = ModelInterface.from_config(await response.json())
            known = self.models.get(interface.name)
            versions = frozenset({entry.get("version", "1")} | (known.versions if known else set()))
            self.models[interface.name] = ModelInterface(
                interface.name, interface.max_batch_size, interface.inputs, interface.outputs, versions
            )
        log.info("serving %s", ", ".join(sorted(self.models)))

    # -- health ---------------------------------------------------------------------------------------
    # Passive first: a model's requests are watched as they are answered; only after failures that are not
    # the model's own refusals (5xx, timeouts, a dropped connection) is it probed, and after
    # limits.HEALTH_FAILURES failed probes in a row it is reported down. A probe is not a client's request:
    # it has its own connection, and one that times out behind client work is judged by the model's progress
    # (tritonserver's statistics, which no model queue holds up): a model that completed requests while the
    # probe waited is slow, reported as such, and never restarted (a pipeline flood restarted every model).

    def record(self, model: str, ok: bool) -> None:
        if ok:
            self._failures[model] = 0
            return
        self._failures[model] = self._failures.get(model, 0) + 1
        if model not in self._probing and model in self.models:
            self._probing.add(model)
            asyncio.get_running_loop().create_task(self._probe_until_decided(model))

    async def probe(self, model: str) -> str | None:
        """None if ``model`` answers a minimal request (an answer or its own refusal), else why not."""
        interface = self.models[model]
        body, header_length = encode_binary_request(probe_request(interface))
        try:
            async with self.session.post(
                f"http://triton/v2/models/{model}/infer",
                data=body,
                headers={HEADER_LENGTH: str(header_length)},
                timeout=aiohttp.ClientTimeout(total=limits.HEALTH_PROBE_TIMEOUT_S),
            ) as response:
                text = await response.text()
                if response.status < 500:
                    return None
                return f"answered {response.status}: {text[:200]}"
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as error:
            return f"did not answer ({type(error).__name__})"

    async def completed(self, model: str) -> int | None:
        """How many requests `model` has completed (succeeded or failed), from tritonserver's statistics;
        None when they cannot be read."""
        try:
            async with self.session.get(
                f"http://triton/v2/models/{model}/stats",
                headers=self.admin_headers,
                timeout=aiohttp.ClientTimeout(total=limits.HEALTH_STATS_TIMEOUT_S),
            ) as response:
                if response.status != 200:
                    return None
                stats = (await response.json()).get("model_stats", [])
            return sum(
                entry["inference_stats"]["success"]["count"] + entry["inference_stats"]["fail"]["count"]
                for entry in stats
            )
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError, KeyError, TypeError, ValueError):
            return None

    async def _probe_until_decided(self, model: str) -> None:
        try:
            failures = 0
            # Progress is counted from the first probe on: over every probe of this decision, not one.
            before = await self.completed(model)
            while failures < limits.HEALTH_FAILURES:
                reason = await self.probe(model)
                if reason is None:
                    self._failures[model] = 0
                    self.slow.pop(model, None)
                    return
                after = await self.completed(model) if reason.startswith("did not answer") else None
                if before is not None and after is not None and after > before:
                    self.slow[model] = (
                        f"its probe waited {limits.HEALTH_PROBE_TIMEOUT_S:g} s in vain while it completed "
                        f"{after - before} requests"
                    )
                    log.warning("model %s is slow, not down: %s", model, self.slow[model])
                    self._failures[model] = 0
                    return
                failures += 1
                await asyncio.sleep(limits.HEALTH_PERIOD_S)
            self.unhealthy[model] = reason
            log.error("model %s stopped answering: %s", model, reason)
            if self.on_model_down is not None:
                self.on_model_down(model, reason)
        finally:
            self._probing.discard(model)
