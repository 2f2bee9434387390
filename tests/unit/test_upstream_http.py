"""The edge's client of tritonserver's HTTP socket (serving/edge/upstream_http.py) against a small server on a
Unix socket: both framings, keep-alive, a connection the server closed, a server that is gone."""

from __future__ import annotations

import asyncio

import pytest

from trt_plugin_kit.serving.edge.upstream_http import UpstreamError, UpstreamHTTP

ANSWERS = {
    b"/length": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
    b"/chunked": b"HTTP/1.1 400 Bad\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
    b"/close": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
}


async def serve(path: str, connections: list, requests: list, close_after_each: bool = False):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                body = await reader.readexactly(length)
                requests.append((head.split(b" ")[1], body))
                writer.write(ANSWERS[head.split(b" ")[1]])
                await writer.drain()
                if close_after_each:
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    return await asyncio.start_unix_server(handle, path)


def test_answers_are_read_by_either_framing_and_connections_are_reused(tmp_path):
    async def scenario():
        connections, requests = [], []
        server = await serve(str(tmp_path / "s"), connections, requests)
        client = UpstreamHTTP(str(tmp_path / "s"))
        first = await client.request("POST", "/length", b"body", {"X-A": "1"})
        second = await client.request("GET", "/chunked")
        third = await client.request("GET", "/close")
        fourth = await client.request("GET", "/length")
        client.close()
        server.close()
        return first, second, third, fourth, connections, requests

    first, second, third, fourth, connections, requests = asyncio.run(scenario())
    assert (first.status, first.body, first.headers["content-type"]) == (200, b"hello", "text/plain")
    assert (second.status, second.body) == (400, b"abcde")
    assert (third.status, third.body, fourth.body) == (200, b"ok", b"hello")
    assert requests[0] == (b"/length", b"body")
    # One connection for the first three (keep-alive), a new one after "Connection: close".
    assert len(connections) == 2


def test_a_pooled_connection_the_server_closed_is_replaced_once(tmp_path):
    async def scenario():
        connections, requests = [], []
        server = await serve(str(tmp_path / "s"), connections, requests, close_after_each=True)
        client = UpstreamHTTP(str(tmp_path / "s"))
        answers = [await client.request("GET", "/length") for _ in range(3)]
        client.close()
        server.close()
        return answers, connections

    answers, connections = asyncio.run(scenario())
    assert [a.body for a in answers] == [b"hello"] * 3
    assert len(connections) == 3


def test_a_server_that_is_gone_is_an_upstream_error(tmp_path):
    client = UpstreamHTTP(str(tmp_path / "nothing-here"))
    with pytest.raises(UpstreamError, match="not reachable"):
        asyncio.run(client.request("GET", "/length"))
