"""Client key check of the gridready router, loaded by LiteLLM's proxy as `general_settings.custom_auth`.

LiteLLM's documented hook (https://docs.litellm.ai/docs/proxy/custom_auth): an async function of the request and
the presented key that returns a `UserAPIKeyAuth` or raises. The per-key `rpm_limit`/`tpm_limit` set on the returned
object are enforced by LiteLLM's own rate limiter with no further flag ("What gets enforced", same page). Keys are
stored as SHA-256 digests only (written by the gridready_router role from the vault), so the proxy needs no database.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

from fastapi import HTTPException, Request
from litellm.proxy._types import UserAPIKeyAuth

KEYS_FILE = Path(os.environ.get("GRIDREADY_ROUTER_KEYS_FILE", "/etc/gridready/router/keys.json"))
# general_settings.master_key is os.environ/LITELLM_MASTER_KEY (gridready.serving.router). With custom_auth set,
# LiteLLM returns this hook's verdict and never compares the master key itself (proxy/auth/user_api_key_auth.py:
# the custom_auth branch returns before the master-key check), so the hook admits it as the proxy's admin.
MASTER_KEY_ENV = "LITELLM_MASTER_KEY"


def _load(path: Path) -> list[dict[str, Any]]:
    entries = json.loads(path.read_text())
    if not isinstance(entries, list) or not all({"name", "sha256"} <= set(e) for e in entries):
        raise ValueError(f"{path}: expected a list of {{name, sha256, rpm_limit, tpm_limit}}")
    return entries


_KEYS = _load(KEYS_FILE)


async def user_api_key_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    presented = api_key.removeprefix("Bearer ").strip()
    master = os.environ.get(MASTER_KEY_ENV, "")
    if master and hmac.compare_digest(presented.encode(), master.encode()):
        return UserAPIKeyAuth(api_key=presented, key_alias="master", user_id="master")
    digest = hashlib.sha256(presented.encode()).hexdigest()
    for entry in _KEYS:
        if hmac.compare_digest(entry["sha256"], digest):
            return UserAPIKeyAuth(api_key=presented, key_alias=entry["name"], user_id=entry["name"],
                                  rpm_limit=entry.get("rpm_limit"), tpm_limit=entry.get("tpm_limit"))
    # an HTTPException keeps its status through LiteLLM's auth error handler (a bare Exception surfaces as a 500 on
    # some routes, e.g. /v1/models, in 1.106.12)
    raise HTTPException(status_code=401, detail="invalid API key")
