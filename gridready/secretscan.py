"""Find plain-text secrets in inventory data without ever echoing them.

A key that names a secret (password, token, api_key, ...) must hold a vault reference (`!vault`, a `{{ }}`
template) or nothing; any string value that has the shape of a credential is refused wherever it sits, e.g. a
token among a tier's `extra_engine_args`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from gridready import charset

# whole words of a key (`hf_token`, `become_password`), not parts of others (`tokenizer`, `max_tokens`)
SECRET_KEY = re.compile(
    r"(?:^|[^a-z])(pass|password|passwd|passphrase|pwd|secret|token|api[_-]?key|private[_-]?key|access[_-]?key"
    r"|credentials?)(?:$|[^a-z])",
    re.IGNORECASE,
)
# keys that are a password themselves (ansible_become_password, ansible_ssh_pass): even a boolean there is one
PASSWORD_KEY = re.compile(r"(pass|password|passwd|passphrase)\Z", re.IGNORECASE | re.ASCII)
# keys that name where a secret is, not the secret: a key file, the name of a Kubernetes Secret
NOT_SECRET_KEY = re.compile(r"(_file|_path|_dir|_checking|^hf_token_secret)\Z", re.IGNORECASE | re.ASCII)
# Credential shapes, each from its issuer's documented format; never inside a longer word (`task-...` is no `sk-`)
SECRET_VALUE = re.compile(
    r"(?<![A-Za-z0-9_])(?:"
    r"hf_[A-Za-z0-9]{30,}|api_org_[A-Za-z0-9]{30,}"  # Hugging Face user and org tokens (hub docs, security-tokens)
    r"|sk-[A-Za-z0-9_-]{20,}"  # OpenAI keys, sk- and sk-proj- (platform.openai.com API keys), Anthropic sk-ant-
    r"|gh[pousr]_[A-Za-z0-9]{36,}"  # GitHub tokens (github.blog, "Behind GitHub's new authentication token formats")
    r"|github_pat_[A-Za-z0-9_]{22,}"  # GitHub fine-grained personal access token (docs.github.com, token prefixes)
    r"|(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}"  # AWS access key ids (IAM user guide, "Understanding unique ID prefixes")
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}"  # Slack bot/user/app tokens (api.slack.com, tokens)
    r"|hooks\.slack\.com/services/T[A-Za-z0-9_/]{20,}"  # Slack incoming webhook URL (the URL is the secret)
    r"|gl(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt|agent)-[A-Za-z0-9_-]{20,}"  # GitLab tokens (docs.gitlab.com, prefixes)
    r"|nvapi-[A-Za-z0-9_-]{20,}"  # NVIDIA NGC / build.nvidia.com API key
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API key
    r"|(?:sk|rk)_live_[0-9A-Za-z]{20,}"  # Stripe secret and restricted keys
    r"|npm_[A-Za-z0-9]{36}|pypi-AgE[A-Za-z0-9_-]{50,}|dckr_pat_[A-Za-z0-9_-]{20,}"  # npm, PyPI, Docker Hub tokens
    r"|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"  # SendGrid API key
    r"|eyJ[A-Za-z0-9_-]{8,}\.ey[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # a JWT (RFC 7519): base64url '{"' header, payload
    r")"
    r"|-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"  # PEM private key (RFC 7468), OpenSSH, PGP private key block
    r"|PuTTY-User-Key-File-"  # PuTTY private key file
    r"|\$ANSIBLE_VAULT;"  # a vault blob pasted into a plain file is still a secret to keep in vault files
)
# engine flags whose value is a secret: `--api-key X`, `--hf-token=X`
SECRET_FLAG = re.compile(r"^--?[A-Za-z0-9-]*(api-key|token|password|secret)[A-Za-z0-9-]*(=.+)?$",
                         re.IGNORECASE | re.ASCII)
VAULT_MARKER = "<vault-encrypted>"
# user:password@ in a URL (RFC 3986 userinfo): apt sources, pip indexes and job events would carry it
URL_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s@]*:[^/?#\s@]*@", re.ASCII)
REDACTED = "<redacted>"


CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def redact(line: str) -> str:
    """`line` fit to print: every credential-shaped part replaced (error lines may name keys, and a key can be a
    secret) and control characters escaped (a key with a newline would print as two lines)."""
    line = URL_CREDENTIALS.sub(lambda m: m.group(0).split("://", 1)[0] + "://" + REDACTED + "@",
                               SECRET_VALUE.sub(REDACTED, line))
    return charset.visible(CONTROL.sub(lambda m: repr(m.group(0))[1:-1], line))


def _referenced(value: str) -> bool:
    return value == VAULT_MARKER or "{{" in value


def _plain_scalar(key: str, value: Any) -> bool:
    """A value that is the secret itself: any scalar (a string, a number, `!!binary` bytes, a date...) that is not
    empty, not a boolean and not a vault reference; mappings and lists are searched instead."""
    if isinstance(value, bool):  # `password: yes` is the password "True"; `use_token: true` is a switch
        return bool(PASSWORD_KEY.search(key))
    if value is None or isinstance(value, dict | list):
        return False
    if isinstance(value, str):
        return bool(value) and not _referenced(value)
    return not (isinstance(value, bytes | bytearray) and not value)


def _loc(path: str, key: object) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))


def find(data: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(key path, what is wrong) for each plain-text secret in `data`; the value itself is never returned."""
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str) and (SECRET_VALUE.search(key) or URL_CREDENTIALS.search(key)):
                yield _loc(path, REDACTED), "a key has the shape of a credential; keep it in the vault"
                continue
            where = _loc(path, key)
            if isinstance(key, str) and SECRET_KEY.search(key) and not NOT_SECRET_KEY.search(key) \
                    and _plain_scalar(key, value):
                yield where, ("looks like a secret in plain text; put it in an ansible-vault file"
                              if isinstance(value, str | int) and not isinstance(value, bool)
                              else "a secret given as binary or another tagged "
                              "value is still in the clear; put it in an ansible-vault file")
                continue
            yield from find(value, where)
    elif isinstance(data, list):
        flagged = False
        for i, value in enumerate(data):
            if flagged and isinstance(value, str) and not _referenced(value):
                yield _loc(path, i), "value of a secret flag in plain text; pass secrets through the vault"
            flagged = isinstance(value, str) and bool(SECRET_FLAG.match(value)) and "=" not in value
            if isinstance(value, str) and SECRET_FLAG.match(value) and "=" in value \
                    and not _referenced(value.split("=", 1)[1]):
                yield _loc(path, i), "secret flag with a plain-text value; pass secrets through the vault"
                continue
            yield from find(value, _loc(path, i))
    elif isinstance(data, bytes | bytearray) and SECRET_VALUE.search(bytes(data).decode("latin-1")):
        yield path or "(top level)", "binary data with the shape of a credential; keep it in the vault"
    elif isinstance(data, str) and SECRET_VALUE.search(data):
        yield path or "(top level)", "has the shape of a credential (token or private key); keep it in the vault"
    elif isinstance(data, str) and URL_CREDENTIALS.search(data):
        yield path or "(top level)", "a URL with a user:password part; credentials belong in the vault"


# `{{ vault_x }}`, the whole value a reference to one vault variable (with a filter or a default it may be absent)
VAULT_REF = re.compile(r"\{\{-?\s*(vault_[A-Za-z0-9_]+)\s*-?\}\}")


def vault_references(data: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(vault variable, key path) for every `{{ vault_x }}` among the values of a plain inventory file, and
    (`!vault <ciphertext>`, key path) for every inline vault value (gridready.yamlio.VaultValue)."""
    if isinstance(data, str) and data == VAULT_MARKER and getattr(data, "ciphertext", ""):
        yield f"!vault {data.ciphertext}", path or "(top level)"  # type: ignore[attr-defined]
    elif isinstance(data, dict):
        for k, v in data.items():
            yield from vault_references(v, _loc(path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from vault_references(v, _loc(path, i))
    elif isinstance(data, str):
        for var in VAULT_REF.findall(data):
            yield var, path or "(top level)"
