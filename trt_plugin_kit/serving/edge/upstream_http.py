"""HTTP/1.1 to tritonserver's private Unix socket, kept to what the edge sends: one request per connection
at a time, pooled keep-alive connections, responses framed by Content-Length or chunked encoding.

Why not aiohttp's client: every request through the edge pays for it, on the cores tritonserver needs, and
this peer is always the same tritonserver writing well-formed answers to requests the edge itself wrote.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from trt_plugin_kit.serving.edge import limits

MAX_HEADER_BYTES = 64 * 1024


class UpstreamError(Exception):
    """tritonserver did not answer (not running, restarting, or a connection that broke)."""


@dataclass
class Answer:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes


class UpstreamHTTP:
    def __init__(self, socket_path: str, pool_size: int = 64):
        self.socket_path = socket_path
        self.pool_size = pool_size
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def request(
        self, method: str, path: str, body: bytes = b"", headers: dict | None = None, hold=None
    ) -> Answer:
        """tritonserver's answer. ``hold(size)``, if given, is called before each part of the answer's body is
        read; what it raises ends the request (the connection, its answer unread, is closed)."""
        head = [f"{method} {path} HTTP/1.1", "Host: triton", f"Content-Length: {len(body)}"]
        head += [f"{name}: {value}" for name, value in (headers or {}).items()]
        message = ("\r\n".join(head) + "\r\n\r\n").encode() + body
        # A pooled connection may have been closed by tritonserver meanwhile: one more try on a new one.
        for attempt in (0, 1):
            reused = bool(self._idle) and attempt == 0
            reader, writer = self._idle.pop() if reused else await self._connect()
            try:
                writer.write(message)
                async with limits.time_limit(limits.UPSTREAM_TIMEOUT_S):
                    answer, keep = await self._read(reader, hold)
            except (ConnectionError, asyncio.IncompleteReadError) as error:
                writer.close()
                if reused:
                    continue
                raise UpstreamError(f"connection to tritonserver lost ({type(error).__name__})") from None
            except BaseException:
                writer.close()
                raise
            if keep and len(self._idle) < self.pool_size:
                self._idle.append((reader, writer))
            else:
                writer.close()
            return answer
        raise UpstreamError("connection to tritonserver lost")

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            return await asyncio.wait_for(asyncio.open_unix_connection(self.socket_path, limit=2**20), 5)
        except (OSError, asyncio.TimeoutError) as error:
            raise UpstreamError(f"tritonserver is not reachable ({type(error).__name__})") from None

    @staticmethod
    async def _read(reader: asyncio.StreamReader, hold=None) -> tuple[Answer, bool]:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > MAX_HEADER_BYTES:
            raise ConnectionError("response header too large")
        lines = head.decode("latin-1").split("\r\n")
        version, status = lines[0].split(" ", 2)[:2]
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    break
                if hold is not None:
                    hold(size)
                chunks.append(await reader.readexactly(size))
                await reader.readexactly(2)
            body = b"".join(chunks)
        else:
            size = int(headers.get("content-length", "0"))
            if hold is not None:
                hold(size)
            body = await reader.readexactly(size)
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        return Answer(int(status), headers, body), keep

    def close(self) -> None:
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()
