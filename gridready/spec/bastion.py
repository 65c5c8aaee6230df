"""The jump host every SSH connection to the nodes goes through, and the host key it must present.

gridready renders it as OpenSSH's ProxyJump (gridready.bastion); the raw forms (`-J`, `ProxyJump`, a
`ProxyCommand` in ansible_ssh_common_args) are refused in the inventory."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
import struct

from pydantic import BaseModel, ConfigDict, Field, field_validator

# RFC 1123 host name (what ssh is given; never an option such as -oProxyCommand=...)
DNS_NAME = re.compile(r"(?=.{1,253}\.?\Z)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                      r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?", re.ASCII)
# host key algorithms of OpenSSH 9.x (sshkey.c keyimpls, without certificates: a bastion's own key is pinned)
HOST_KEY_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa",
                  "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com")


class Bastion(BaseModel):
    """A jump host: `ssh -J user@host:port`, its host key checked against `host_key` (never trust on first use)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    host: str = Field(description="IP address or DNS name of the jump host")
    port: int = Field(22, ge=1, le=65535)
    user: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$", description="login on the jump host")
    host_key: str = Field(description="the jump host's public host key as ssh-keyscan prints it without the host "
                                      "name: '<type> <base64>', e.g. ssh-ed25519 AAAAC3Nza...")

    @field_validator("host")
    @classmethod
    def _address(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            if not DNS_NAME.fullmatch(value) or re.fullmatch(r"[0-9.]+", value):
                raise ValueError("must be an IP address or a DNS host name") from None
        return value

    @field_validator("host_key")
    @classmethod
    def _host_key(cls, value: str) -> str:
        parts = value.split()
        if len(parts) < 2 or parts[0] not in HOST_KEY_TYPES:
            raise ValueError(f"must be '<type> <base64>' with a type of {', '.join(HOST_KEY_TYPES)}")
        try:
            blob = base64.b64decode(parts[1], validate=True)
            (size,) = struct.unpack(">I", blob[:4])
            embedded = blob[4:4 + size].decode("ascii")
        except (binascii.Error, struct.error, UnicodeDecodeError, ValueError):
            raise ValueError("the key is not an OpenSSH public key (base64 of the key blob)") from None
        if embedded != parts[0]:
            raise ValueError("the key blob is of another type than the one named")
        return f"{parts[0]} {parts[1]}"
