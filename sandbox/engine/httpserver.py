"""A minimal asyncio HTTP/1.1 server: keep-alive, Content-Length bodies, chunked streaming responses."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

log = logging.getLogger("gridready.sim")

MAX_BODY = 16 * 1024 * 1024
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large",
           500: "Internal Server Error", 503: "Service Unavailable"}
# Every response says it comes from the simulator.
SIM_HEADERS = {"X-Gridready-Simulated": "1", "Server": "gridready-sim"}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    received: float = field(default_factory=time.perf_counter)  # when the body was complete

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


class Responder:
    """Writes one response: whole (send/send_json) or streamed in chunks (start_stream/chunk/end)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._w = writer
        self.status = 0
        self.streaming = False

    def _head(self, status: int, headers: dict[str, str]) -> bytes:
        self.status = status
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
        lines += [f"{k}: {v}" for k, v in {**SIM_HEADERS, **headers}.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    async def send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        head = self._head(status, {"Content-Type": content_type, "Content-Length": str(len(body))})
        self._w.write(head + body)
        await self._w.drain()

    async def send_json(self, status: int, obj: Any) -> None:
        await self.send(status, json.dumps(obj).encode(), "application/json")

    async def start_stream(self, status: int = 200, content_type: str = "text/event-stream") -> None:
        self.streaming = True
        head = self._head(status, {"Content-Type": content_type, "Transfer-Encoding": "chunked",
                                   "Cache-Control": "no-cache"})
        self._w.write(head)
        await self._w.drain()

    async def chunk(self, data: bytes) -> None:
        self._w.write(b"%x\r\n%s\r\n" % (len(data), data))
        await self._w.drain()

    async def end(self) -> None:
        self._w.write(b"0\r\n\r\n")
        await self._w.drain()


Handler = Callable[[Request, Responder], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Request | None:
    line = await reader.readline()
    if not line:
        return None
    try:
        method, target, _version = line.decode("latin-1").strip().split(" ", 2)
    except ValueError:
        raise ValueError(f"bad request line {line[:80]!r}") from None
    headers: dict[str, str] = {}
    while True:
        h = await reader.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        name, _, value = h.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    if length > MAX_BODY:
        raise ValueError("body too large")
    if length and headers.get("expect", "").lower() == "100-continue":  # curl does this for larger bodies
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    body = await reader.readexactly(length) if length else b""
    parts = urlsplit(target)
    return Request(method.upper(), parts.path, parse_qs(parts.query), headers, body)


def serve_connection(handler: Handler) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    """A connection callback for asyncio.start_server that loops over keep-alive requests."""

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    req = await _read_request(reader, writer)
                except ValueError as err:
                    await Responder(writer).send_json(400, {"error": {"message": str(err), "code": 400}})
                    break
                if req is None:
                    break
                resp = Responder(writer)
                try:
                    await handler(req, resp)
                except (ConnectionError, asyncio.IncompleteReadError):
                    raise
                except Exception as err:  # a handler bug must not kill the server
                    log.exception("handler failed: %s %s", req.method, req.path)
                    if resp.status == 0:
                        await resp.send_json(500, {"error": {"message": str(err), "code": 500}})
                    break
                if req.headers.get("connection", "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    return on_connection
