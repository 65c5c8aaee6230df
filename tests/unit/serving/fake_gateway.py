"""A Gateway on loopback (tests only): it forwards to one backend the requests whose path an HTTPRoute's rules
match (Gateway API v1 HTTPRoute, PathPrefix matches: a prefix of whole path segments) and answers 404 to the rest,
as a Gateway does for a path no route attaches. Responses are forwarded whole (not streamed)."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOP_BY_HOP = {"connection", "transfer-encoding", "keep-alive", "content-length"}


def prefixes(route: dict[str, Any]) -> list[str]:
    return [m["path"]["value"] for rule in route["spec"]["rules"] for m in rule.get("matches", [])
            if m.get("path", {}).get("type") == "PathPrefix"]


def matches(prefix: str, path: str) -> bool:
    """PathPrefix: `/v1` matches /v1 and /v1/models, not /v1x (element-wise, trailing slash ignored)."""
    prefix, path = prefix.rstrip("/"), path.split("?", 1)[0]
    return not prefix or path == prefix or path.startswith(prefix + "/")


@contextmanager
def serve(routes: list[dict[str, Any]], backend: str, seen: list[str]) -> Iterator[int]:
    """Yields the port the Gateway listens on; `routes`: the HTTPRoutes attached so far (read on every request);
    `seen` collects "<status> <path>" of every request."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            if not any(matches(p, self.path) for r in routes for p in prefixes(r)):
                seen.append(f"404 {self.path}")
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | {"host"}}
            request = urllib.request.Request(backend + self.path, data=body, headers=headers, method=self.command)
            try:
                with urllib.request.urlopen(request, timeout=60) as answer:
                    status, out, data = answer.status, answer.headers.items(), answer.read()
            except urllib.error.HTTPError as err:
                status, out, data = err.code, err.headers.items(), err.read()
            seen.append(f"{status} {self.path}")
            self.send_response(status)
            for key, value in out:
                if key.lower() not in HOP_BY_HOP:
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._forward()

        def do_POST(self) -> None:
            self._forward()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
