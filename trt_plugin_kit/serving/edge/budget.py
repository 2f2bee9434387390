"""The HTTP front's budgets (edge/limits.py sets them; the compiled gRPC front keeps the same books in C++,
edge/native/grpc_transport.cc): connections per front and per peer, counted at accept, and the bytes held
for clients' requests, in all and per peer, taken before they are read and refused at once past either.

glibc keeps what Python frees for reuse: a burst of 32 MiB bodies would stay in the process for good (1.5 GB
observed). Buffers of 256 KiB and more are therefore mmapped (given back when freed), and once a burst is
over what glibc still holds is trimmed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import socket
import struct

from trt_plugin_kit.serving.edge import limits, policy
from trt_plugin_kit.serving.edge.tensors import Refused

log = logging.getLogger("trt_plugin_kit.serving.edge")
BURST_BYTES = 64 * 1024 * 1024  # held past this, then less than QUIET_BYTES: memory is trimmed
QUIET_BYTES = 8 * 1024 * 1024
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


def _libc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:  # pragma: no cover - not glibc
        return None


_LIBC = _libc()


def mmap_large_buffers() -> None:
    """Buffers of 256 KiB and more from mmap, so that they go back to the system when freed (glibc's
    threshold otherwise grows to the largest buffer freed). Fixing it fixes the heap's trim threshold too,
    at 128 KiB, which would give the heap's top back and take it again on every request: it is set to 64 MiB,
    and malloc_trim gives the rest back after a burst (Budget.give_back)."""
    if _LIBC is not None:
        _LIBC.mallopt(_M_MMAP_THRESHOLD, 256 * 1024)
        _LIBC.mallopt(_M_TRIM_THRESHOLD, 64 * 1024 * 1024)


def peer_key(address: str | None) -> str:
    """The peer's address as a budget key: IPv4 whole, IPv6 by its /64."""
    if not address:
        return "unix"
    if ":" in address and not address.startswith("::ffff:"):
        try:
            return socket.inet_pton(socket.AF_INET6, address.split("%")[0])[:8].hex()
        except OSError:
            return address
    return address.removeprefix("::ffff:")


def peer_of(transport) -> str:
    peer = transport.get_extra_info("peername") if transport is not None else None
    return peer_key(str(peer[0]) if isinstance(peer, tuple) else None)


def busy(per_peer: bool) -> Refused:
    """Past a byte budget: 429 (this peer's) or 503 (the front's), both with Retry-After."""
    refusal = Refused(policy.BUSY_REFUSAL, status=429 if per_peer else 503, grpc_code="RESOURCE_EXHAUSTED")
    refusal.retry_after = limits.RETRY_AFTER_S
    return refusal


class Budget:
    """Connections and bytes held, in all and by peer."""

    def __init__(
        self,
        max_bytes: int = limits.BUFFER_BYTES,
        max_bytes_per_peer: int = limits.BUFFER_BYTES_PER_PEER,
        max_connections: int = limits.MAX_HTTP_CONNECTIONS,
        max_connections_per_peer: int = limits.MAX_CONNECTIONS_PER_PEER,
    ):
        self.max_bytes, self.max_bytes_per_peer = max_bytes, max_bytes_per_peer
        self.max_connections, self.max_connections_per_peer = max_connections, max_connections_per_peer
        self.bytes = 0
        self.connections = 0
        self._peer_bytes: dict[str, int] = {}
        self._peer_connections: dict[str, int] = {}
        self._burst = False

    # -- connections ----------------------------------------------------------------------------------

    def admit(self, peer: str) -> bool:
        held = self._peer_connections.get(peer, 0)
        if self.connections >= self.max_connections or held >= self.max_connections_per_peer:
            return False
        self.connections += 1
        self._peer_connections[peer] = held + 1
        return True

    def leave(self, peer: str) -> None:
        self.connections -= 1
        held = self._peer_connections.pop(peer) - 1
        if held:
            self._peer_connections[peer] = held

    # -- bytes ------------------------------------------------------------------------------------------

    def take(self, peer: str, size: int) -> None:
        """Hold `size` more bytes for `peer`, or Refused (429/503) at once."""
        held = self._peer_bytes.get(peer, 0)
        if held + size > self.max_bytes_per_peer:
            raise busy(per_peer=True)
        if self.bytes + size > self.max_bytes:
            raise busy(per_peer=False)
        self.bytes += size
        self._peer_bytes[peer] = held + size
        self._burst = self._burst or self.bytes > BURST_BYTES

    def give_back(self, peer: str, size: int) -> None:
        self.bytes -= size
        held = self._peer_bytes.pop(peer) - size
        if held:
            self._peer_bytes[peer] = held
        if self._burst and self.bytes < QUIET_BYTES:
            self._burst = False
            if _LIBC is not None:
                _LIBC.malloc_trim(0)


class Holding:
    """One request's bytes in the budget, given back together when it is answered."""

    def __init__(self, budget: Budget, peer: str):
        self.budget, self.peer, self.size = budget, peer, 0

    def take(self, size: int) -> None:
        self.budget.take(self.peer, size)
        self.size += size

    def resize(self, size: int) -> None:
        """Hold `size` bytes in all (less: given back; more: taken, or refused)."""
        if size > self.size:
            self.take(size - self.size)
        elif size < self.size:
            self.budget.give_back(self.peer, self.size - size)
            self.size = size

    def release(self) -> None:
        if self.size:
            self.budget.give_back(self.peer, self.size)
            self.size = 0


def reset_on_close(transport) -> None:
    """Closing the transport sends RST, leaving no TIME_WAIT here (a connection refused at accept)."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:  # pragma: no cover - not a TCP socket
            pass
