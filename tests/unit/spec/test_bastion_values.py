"""spec.bastion at the value level: the jump host's address (IP or RFC 1123 name, never an option or a dotted
number that is no IP) and its pinned host key, whose base64 blob must name the same type as the line (RFC 4253
section 6.6: a string, uint32 length then bytes, of the key type first; RFC 8709 for ssh-ed25519)."""

from __future__ import annotations

import base64
import struct

import pytest

from gridready.spec.bastion import HOST_KEY_TYPES, Bastion
from tests.unit.spec.spec_lines import lines


def ssh_string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def key_line(kind: str = "ssh-ed25519", blob_kind: str | None = None) -> str:
    blob = ssh_string((blob_kind or kind).encode()) + ssh_string(bytes(range(32)))
    return f"{kind} {base64.b64encode(blob).decode()}"


def bastion(**over: object) -> dict[str, object]:
    return {"host": "jump.example.com", "user": "ops", "host_key": key_line(), **over}


ADDRESS = "cluster.yml: host: must be an IP address or a DNS host name"
TYPES = ("cluster.yml: host_key: must be '<type> <base64>' with a type of ssh-ed25519, ecdsa-sha2-nistp256, "
         "ecdsa-sha2-nistp384, ecdsa-sha2-nistp521, ssh-rsa, sk-ssh-ed25519@openssh.com, "
         "sk-ecdsa-sha2-nistp256@openssh.com")
NOT_A_KEY = "cluster.yml: host_key: the key is not an OpenSSH public key (base64 of the key blob)"
OTHER_TYPE = "cluster.yml: host_key: the key blob is of another type than the one named"


@pytest.mark.parametrize("host", ["10.0.0.1", "fd00::1", "jump.example.com", "jump", "jump-1.dc2.example.com.",
                                  "a" * 63 + ".example.com"])
def test_addresses_accepted(host):
    assert Bastion.model_validate(bastion(host=host)).host == host


@pytest.mark.parametrize("host", ["-oProxyCommand=sh", "10.0.0.256", "999.1.1.1", "1.2.3", "jump_host", "jump..x",
                                  "a" * 64 + ".example.com", "jump host", ""])
def test_addresses_refused(host):
    assert lines(Bastion, bastion(host=host)) == [ADDRESS]


@pytest.mark.parametrize("kind", HOST_KEY_TYPES)
def test_every_named_type_whose_blob_agrees_is_accepted(kind):
    assert Bastion.model_validate(bastion(host_key=key_line(kind))).host_key == key_line(kind)


def test_the_comment_after_the_key_is_dropped():
    assert Bastion.model_validate(bastion(host_key=key_line() + " root@jump")).host_key == key_line()
    assert Bastion.model_validate(bastion(host_key="  " + key_line().replace(" ", "\t"))).host_key == key_line()


@pytest.mark.parametrize(("host_key", "line"), [
    ("ssh-ed25519", TYPES),                                   # no blob
    ("", TYPES),
    (key_line().replace("ssh-ed25519", "ssh-dss", 1), TYPES),  # a type OpenSSH 9 dropped
    (key_line().replace("ssh-ed25519", "SSH-ED25519", 1), TYPES),
    ("ssh-ed25519 AAAA!AAA", NOT_A_KEY),                       # not base64 (validate=True refuses, never skips)
    ("ssh-ed25519 AAAAC3Nza", NOT_A_KEY),                      # bad padding
    ("ssh-ed25519 " + base64.b64encode(b"\x00\x00").decode(), NOT_A_KEY),         # shorter than the length
    ("ssh-ed25519 " + base64.b64encode(ssh_string(b"ssh-ed\xff5519")).decode(), NOT_A_KEY),  # not ASCII
    (key_line("ssh-ed25519", "ssh-rsa"), OTHER_TYPE),
    (key_line("ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384"), OTHER_TYPE),
])
def test_host_keys_refused(host_key, line):
    assert lines(Bastion, bastion(host_key=host_key)) == [line]


def test_the_length_prefix_is_big_endian_and_bounds_the_type():
    # "ssh-ed25519" is 11 bytes: a little-endian prefix, or a length one short or long, names another type
    good = ssh_string(b"ssh-ed25519") + ssh_string(bytes(32))
    assert lines(Bastion, bastion(host_key="ssh-ed25519 " + base64.b64encode(good).decode())) == []
    little = struct.pack("<I", 11) + b"ssh-ed25519" + ssh_string(bytes(32))
    short = struct.pack(">I", 10) + b"ssh-ed25519" + ssh_string(bytes(32))
    for blob in (little, short):
        assert lines(Bastion, bastion(host_key="ssh-ed25519 " + base64.b64encode(blob).decode())) == [OTHER_TYPE]


@pytest.mark.parametrize(("port", "ok"), [(1, True), (22, True), (65535, True), (0, False), (65536, False)])
def test_port_bounds(port, ok):
    assert (lines(Bastion, bastion(port=port)) == []) is ok
