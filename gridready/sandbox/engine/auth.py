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
