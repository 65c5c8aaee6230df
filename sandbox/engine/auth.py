"""vLLM's API-key check, as the simulated engine applies it.

vLLM (vllm/entrypoints/openai/api_server.py, build_app) installs its authentication middleware when `--api-key`
or the environment variable VLLM_API_KEY is set (the command-line keys take precedence). The middleware
(vllm/entrypoints/openai/server_utils.py, AuthenticationMiddleware, github.com/vllm-project/vllm) answers
401 {"error": "Unauthorized"} to a request whose path is guarded and whose `Authorization` header is not
`Bearer <one of the keys>` (scheme case-insensitive); OPTIONS requests pass. Public: /health, /ping, /load,
/version, /metrics and the API docs. Every vLLM release with the middleware guards /v1; newer ones derive the
guarded set from the route table with /v1, /v2, /inference and /cohere as the floor.
"""

from __future__ import annotations

import hashlib
import hmac
import json

GUARDED_PREFIXES = ("/v1", "/v2", "/inference", "/cohere")


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class ApiKeys:
    def __init__(self, keys: list[str]) -> None:
        self._digests = [_digest(k) for k in keys if k]

    @property
    def enabled(self) -> bool:
        return bool(self._digests)

    def allows(self, method: str, path: str, headers: dict[str, str]) -> bool:
        """True when vLLM would pass the request on (no key set, public path, OPTIONS, or a matching key)."""
        if not self._digests or method == "OPTIONS" or not path.startswith(GUARDED_PREFIXES):
            return True
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        given = _digest(token)
        return any(hmac.compare_digest(given, d) for d in self._digests)


class SglangApiKey:
    """SGLang's API-key check, as the simulated engine applies it in sglang mode.

    SGLang (python/sglang/srt/utils.py, add_api_key_middleware, installed by http_server.py when `--api-key` or the
    `api-key` key of the `--config` file is set) passes OPTIONS requests and paths that start with /health or
    /metrics, and answers every other request whose `Authorization` header is not exactly `Bearer <key>` with
    401 {"error": "Unauthorized"}.
    """

    PUBLIC_PREFIXES = ("/health", "/metrics")

    def __init__(self, key: str | None) -> None:
        self._expected = f"Bearer {key}".encode() if key else None

    @property
    def enabled(self) -> bool:
        return self._expected is not None

    def allows(self, method: str, path: str, headers: dict[str, str]) -> bool:
        if self._expected is None or method == "OPTIONS" or path.startswith(self.PUBLIC_PREFIXES):
            return True
        return hmac.compare_digest(headers.get("authorization", "").encode(), self._expected)


def sglang_config_key(path: str) -> str | None:
    """The `api-key` of an SGLang `--config` file (YAML, server argument names as keys; CLI flags override it).
    SIMULATOR LIMIT: a flat mapping of scalars only, as gridready writes it; anything else is refused."""
    key = None
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise SystemExit(f"error: {path}:{number}: not a `key: value` line (SIMULATED SGLang --config)")
        value = value.strip()
        if value.startswith('"'):
            value = json.loads(value)
        if name.strip() in ("api-key", "api_key"):
            key = str(value)
    return key
