#!/usr/bin/python
"""gridready_openpgp_key: read-only check that an apt signing key file holds exactly the pinned OpenPGP key.

A key downloaded over plain http (a mirror without TLS) is only as trustworthy as the network; apt trusts every
primary key in a `Signed-By` file (sources.list(5), https://manpages.debian.org/bookworm/apt/sources.list.5.en.html),
so the file must hold the pinned primary key and no other. The fingerprint is computed here, on the node, from the
key packets themselves, so the check needs no gpg binary (Debian's apt depends on gpgv only):
- RFC 4880 section 12.2 (https://datatracker.ietf.org/doc/html/rfc4880#section-12.2): a V4 fingerprint is the
  SHA-1 of the octet 0x99, the two-octet packet length and the Public-Key packet body from its version octet;
- RFC 9580 section 5.5.4 (https://datatracker.ietf.org/doc/html/rfc9580#section-5.5.4): a V6 fingerprint is the
  SHA-256 of 0x9B, the four-octet length and the body;
- packet headers (old and new format) and ASCII armor: RFC 4880 sections 4.2 and 6.2.
Module API: https://docs.ansible.com/ansible/latest/dev_guide/developing_program_flow_modules.html
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: gridready_openpgp_key
short_description: Fail unless a key file holds exactly the pinned OpenPGP primary key
options:
  path: {type: path, required: true, description: the keyring (binary .gpg or armored .asc)}
  fingerprint: {type: str, required: true, description: the pinned primary key fingerprint (hex, spaces allowed)}
"""

PUBLIC_KEY, PUBLIC_SUBKEY = 6, 14
ARMOR = re.compile(rb"-----BEGIN PGP PUBLIC KEY BLOCK-----\n(.*?)-----END PGP PUBLIC KEY BLOCK-----", re.S)


class KeyFileError(ValueError):
    """The file is not a readable OpenPGP key."""


def dearmor(data: bytes) -> bytes:
    """Binary packets of an armored key block (headers and the CRC line dropped); binary input unchanged."""
    blocks = ARMOR.findall(data.replace(b"\r\n", b"\n"))
    if not blocks:
        return data
    out = b""
    for block in blocks:
        head, sep, body = block.partition(b"\n\n")  # armor headers end at the first empty line
        lines = (body if sep else head).split(b"\n")
        text = b"".join(line.strip() for line in lines if line.strip() and not line.strip().startswith(b"="))
        try:
            out += base64.b64decode(text, validate=True)
        except binascii.Error as exc:
            raise KeyFileError(f"bad ASCII armor: {exc}") from exc
    return out


def packets(data: bytes) -> list[tuple[int, bytes]]:
    """(tag, body) of each packet; partial body lengths are not allowed in key packets (RFC 4880 4.2.2.4)."""
    out, i = [], 0
    while i < len(data):
        ctb = data[i]
        if not ctb & 0x80:
            raise KeyFileError(f"no OpenPGP packet at byte {i}")
        if ctb & 0x40:  # new format
            tag, i = ctb & 0x3F, i + 1
            if i >= len(data):
                raise KeyFileError("truncated packet header")
            first = data[i]
            if first < 192:
                length, i = first, i + 1
            elif first < 224:
                length, i = ((first - 192) << 8) + data[i + 1] + 192, i + 2
            elif first == 255:
                length, i = int.from_bytes(data[i + 1:i + 5], "big"), i + 5
            else:
                raise KeyFileError("partial body length in a key file")
        else:  # old format
            tag, kind, i = (ctb >> 2) & 0x0F, ctb & 0x03, i + 1
            if kind == 3:
                raise KeyFileError("indeterminate packet length in a key file")
            size = (1, 2, 4)[kind]
            length, i = int.from_bytes(data[i:i + size], "big"), i + size
        if i + length > len(data):
            raise KeyFileError("truncated packet")
        out.append((tag, data[i:i + length]))
        i += length
    return out


def fingerprint(body: bytes) -> str:
    version = body[0] if body else 0
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body, usedforsecurity=False).hexdigest().upper()
    if version == 6:
        return hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise KeyFileError(f"key packet version {version} (only V4 and V6 keys have a fingerprint to pin)")


def primary_fingerprints(data: bytes) -> list[str]:
    """Fingerprints of the primary keys in a key file (subkeys belong to their primary key)."""
    keys = [fingerprint(body) for tag, body in packets(dearmor(data)) if tag == PUBLIC_KEY]
    if not keys:
        raise KeyFileError("no public key in the file")
    return keys


def normalise(pin: str) -> str:
    return re.sub(r"\s+", "", pin).upper()


def verdict(data: bytes, pin: str) -> str | None:
    """None when the file holds exactly the pinned primary key; else what is wrong, in one sentence."""
    want = normalise(pin)
    try:
        found = primary_fingerprints(data)
    except KeyFileError as exc:
        return f"not an OpenPGP public key: {exc}"
    others = sorted(set(found) - {want})
    if want not in found:
        return f"holds {', '.join(found)}, not the pinned key {want}"
    if others:
        return f"holds the pinned key {want} and also {', '.join(others)} (apt would trust every key in the file)"
    return None


def main() -> None:
    module = AnsibleModule(argument_spec={"path": {"type": "path", "required": True},
                                          "fingerprint": {"type": "str", "required": True}},
                           supports_check_mode=True)
    path, pin = module.params["path"], module.params["fingerprint"]
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        module.fail_json(msg=f"{path}: {exc.strerror}")
    wrong = verdict(data, pin)
    if wrong:
        module.fail_json(msg=f"{path} {wrong}", fingerprint=normalise(pin))
    module.exit_json(changed=False, fingerprint=normalise(pin))


if __name__ == "__main__":
    main()
