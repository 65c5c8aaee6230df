"""A small asyncio HTTP/1.1 client: keep-alive, Content-Length/chunked/close framing, SSE with arrival times.

Stdlib only, so timestamps are taken right where bytes arrive (no library buffering in between).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


class HttpError(Exception):
    """Connection, framing or timeout failure (not an HTTP error status)."""


class _StaleConnection(HttpError):
    """The server closed the connection before answering (retried once when the connection was reused)."""


@dataclass(frozen=True)
class Url:
    scheme: str
    host: str
    port: int
    base: str  # path prefix without trailing slash
    # Bearer token sent with every request (vLLM's --api-key); never part of str(), repr() or equality
    token: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def parse(cls, url: str, token: str | None = None) -> Url:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"), token)

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.base}"


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    sent: float  # perf_counter just before the request was written
    head_at: float  # perf_counter when the status line arrived
    _framing: str = "length"  # length | chunked | close
    _remaining: int = 0
    done: bool = False
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def simulated(self) -> bool:
        return self.headers.get("x-gridready-simulated") == "1"


class Connection:
    """One keep-alive connection; one request at a time."""

    def __init__(self, url: Url, connect_timeout: float = 10.0) -> None:
        self.url = url
        self.connect_timeout = connect_timeout
        self._r: asyncio.StreamReader | None = None
        self._w: asyncio.StreamWriter | None = None
        self.reusable = False

    async def connect(self) -> None:
        ctx = ssl.create_default_context() if self.url.scheme == "https" else None
        try:
            self._r, self._w = await asyncio.wait_for(
                asyncio.open_connection(self.url.host, self.url.port, ssl=ctx, limit=1 << 20),
                self.connect_timeout)
        except (OSError, TimeoutError) as err:
            raise HttpError(f"cannot connect to {self.url.host}:{self.url.port}: {err or type(err).__name__}") \
                from err
        self.reusable = True

    def close(self) -> None:
        if self._w is not None:
            self._w.close()
        self._r = self._w = None
        self.reusable = False

    async def request(self, method: str, path: str, body: bytes | None = None,
                      headers: dict[str, str] | None = None) -> Response:
        """Send a request and read the status line and headers; the body is read with read()/iter_body().

        A reused keep-alive connection the server closed meanwhile (uvicorn closes idle ones after 5 s) gets one
        retry on a fresh connection; nothing was processed, as no response byte came back."""
        reused = self._w is not None and self.reusable
        try:
            return await self._request(method, path, body, headers)
        except _StaleConnection as err:
            if not reused:
                raise HttpError(str(err)) from None
            return await self._request(method, path, body, headers)

    async def _request(self, method: str, path: str, body: bytes | None,
                       headers: dict[str, str] | None) -> Response:
        if self._w is None or not self.reusable:
            self.close()
            await self.connect()
        assert self._r is not None and self._w is not None
        hdrs = {"Host": f"{self.url.host}:{self.url.port}", "User-Agent": "gridready-bench", "Accept": "*/*",
                **({"Authorization": f"Bearer {self.url.token}"} if self.url.token else {}), **(headers or {})}
        if body is not None:
            hdrs["Content-Length"] = str(len(body))
        head = f"{method} {self.url.base}{path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
        self.reusable = False  # until the response body has been read completely
        sent = time.perf_counter()
        try:
            self._w.write(head.encode() + b"\r\n" + (body or b""))
            await self._w.drain()
            line = await self._r.readline()
            head_at = time.perf_counter()
            if not line:
                self.close()
                raise _StaleConnection(f"{method} {path}: connection closed before a response")
            parts = line.decode("latin-1").split(" ", 2)
            status = int(parts[1])
            rh: dict[str, str] = {}
            while True:
                h = await self._r.readline()
                if h in (b"\r\n", b"\n", b""):
                    break
                k, _, v = h.decode("latin-1").partition(":")
                rh[k.strip().lower()] = v.strip()
        except (ConnectionResetError, BrokenPipeError) as err:
            self.close()
            raise _StaleConnection(f"{method} {path}: {type(err).__name__}: {err}") from err
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as err:
            self.close()
            raise HttpError(f"{method} {path}: {type(err).__name__}: {err}") from err
        resp = Response(status, rh, sent, head_at)
        if rh.get("transfer-encoding", "").lower() == "chunked":
            resp._framing = "chunked"
        elif "content-length" in rh:
            resp._remaining = int(rh["content-length"])
            resp.done = resp._remaining == 0
        else:
            resp._framing = "close"
        if resp.done:
            self._finish(resp)
        return resp

    def _finish(self, resp: Response) -> None:
        resp.done = True
        self.reusable = resp._framing != "close" and resp.headers.get("connection", "").lower() != "close"
        if not self.reusable:
            self.close()

    async def iter_body(self, resp: Response) -> AsyncIterator[tuple[float, bytes]]:
        """Yield (arrival perf_counter, bytes) as body pieces arrive."""
        r = self._r
        if resp.done or r is None:
            return
        try:
            if resp._framing == "length":
                while resp._remaining > 0:
                    data = await r.read(min(resp._remaining, 1 << 16))
                    if not data:
                        raise HttpError("connection closed mid-body")
                    resp._remaining -= len(data)
                    yield time.perf_counter(), data
            elif resp._framing == "chunked":
                while True:
                    size_line = await r.readline()
                    size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                    if size == 0:
                        while (await r.readline()) not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        break
                    data = await r.readexactly(size + 2)
                    yield time.perf_counter(), data[:-2]
            else:
                while data := await r.read(1 << 16):
                    yield time.perf_counter(), data
        except (OSError, asyncio.IncompleteReadError, ValueError) as err:
            self.close()
            raise HttpError(f"reading body: {type(err).__name__}: {err}") from err
        self._finish(resp)

    async def read(self, resp: Response) -> bytes:
        return b"".join([d async for _t, d in self.iter_body(resp)])

    async def sse(self, resp: Response) -> AsyncIterator[tuple[float, bytes]]:
        """Yield (arrival time, data) per server-sent event; the time is when its last byte arrived."""
        buf = b""
        async for t, data in self.iter_body(resp):
            buf += data.replace(b"\r\n", b"\n")
            while (end := buf.find(b"\n\n")) >= 0:
                event, buf = buf[:end], buf[end + 2:]
                payload = b"\n".join(line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:"))
                if payload:
                    yield t, payload


async def fetch(url: str | Url, path: str, method: str = "GET", body: Any = None,
                timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection: (status, headers, body). Raises HttpError (incl. timeouts)."""
    u = url if isinstance(url, Url) else Url.parse(url)
    conn = Connection(u, connect_timeout=timeout)
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    hdrs = {"Content-Type": "application/json"} if data is not None else {}

    async def go() -> tuple[int, dict[str, str], bytes]:
        resp = await conn.request(method, path, data, hdrs)
        return resp.status, resp.headers, await conn.read(resp)

    try:
        return await asyncio.wait_for(go(), timeout)
    except TimeoutError as err:
        raise HttpError(f"{method} {u}{path}: no answer within {timeout:g} s") from err
    finally:
        conn.close()
