"""Credentials of the object storage vLLM tiers load LoRA adapters from on Kubernetes (Ray Serve LLM downloads each
adapter from dynamic_lora_loading_path with the cloud SDK's own credential chain, which reads the environment).

They live in the customer's vault as one mapping, `vault_gridready_lora_bucket_env` (environment name -> value,
e.g. AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL), reach Pulumi as secret config, and the serving
stack turns them into a Secret the RayService pods take as environment (envFrom): never argv, never the stack's
plain config, never artifacts. Absent: an empty Secret (a public bucket, or the nodes' own cloud identity).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from gridready import vault
from gridready.errors import InvalidInput

BUCKET_ENV_VAR = "vault_gridready_lora_bucket_env"
# the SDKs' own variables only: nothing that could change what the engine runs (PATH, LD_PRELOAD, VLLM_*)
ENV_NAME = re.compile(r"(AWS|AZURE|GOOGLE|GCS)_[A-Z0-9_]{1,64}")


def env_json(customer: str, inv_dir: Path) -> str:
    """The vault's bucket credentials as the JSON the serving stack reads ('{}' when there are none)."""
    value = vault.read(customer, inv_dir).get(BUCKET_ENV_VAR, {})
    where = f"{vault.vault_path(inv_dir)}: {BUCKET_ENV_VAR}"
    if not isinstance(value, dict):
        raise InvalidInput(f"{where}: must be a mapping of environment names to values")
    for name, text in value.items():
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            raise InvalidInput(f"{where}: {str(name)[:80]!r}: not a cloud SDK variable (AWS_*, AZURE_*, GOOGLE_*, "
                               "GCS_*)")
        if not isinstance(text, str):
            raise InvalidInput(f"{where}: {name}: must be a string")
    return json.dumps(value, sort_keys=True)
