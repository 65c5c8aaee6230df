"""The multi-node Triton tier's ssh Secret to the byte, in process: each key file read by OpenSSH's own formats
(PROTOCOL.key for the private key, RFC 4253 section 6.6 / RFC 8709 for the public key line), the exact
ssh_config, known_hosts and authorized_keys, the vault-less placeholders and the workers' sshd command line."""

from __future__ import annotations

import base64
import json
import struct

import pytest

from gridready.serving import mpi_ssh

BEGIN, END = "-----BEGIN OPENSSH PRIVATE KEY-----", "-----END OPENSSH PRIVATE KEY-----"


def _strings(blob: bytes, at: int, n: int) -> tuple[list[bytes], int]:
    """n SSH `string`s (uint32 length + bytes, RFC 4251 section 5) from `blob` at `at`."""
    out = []
    for _ in range(n):
        (size,) = struct.unpack(">I", blob[at:at + 4])
        out.append(blob[at + 4:at + 4 + size])
        at += 4 + size
    return out, at


def openssh_key(private: str) -> tuple[bytes, bytes, bytes]:
    """(cipher, kdf, public key blob) of an OpenSSH private key file (PROTOCOL.key: "openssh-key-v1\\0", ciphername,
    kdfname, kdfoptions, uint32 number of keys, then each public key blob)."""
    lines = private.strip().splitlines()
    assert lines[0] == BEGIN and lines[-1] == END
    blob = base64.b64decode("".join(lines[1:-1]))
    magic = b"openssh-key-v1\0"
    assert blob.startswith(magic)
    (cipher, kdf, _opts), at = _strings(blob, len(magic), 3)
    (count,) = struct.unpack(">I", blob[at:at + 4])
    assert count == 1
    (public,), _ = _strings(blob, at + 4, 1)
    return cipher, kdf, public


def public_line(private: str, comment: str) -> str:
    """The authorized_keys line OpenSSH writes for the key: type, base64 of the public blob, comment."""
    public = openssh_key(private)[2]
    (kind, raw), _ = _strings(public, 0, 2)
    assert kind == b"ssh-ed25519" and len(raw) == 32  # RFC 8709: the 32-byte public key
    return f"ssh-ed25519 {base64.b64encode(public).decode()} {comment}"


@pytest.fixture(scope="module")
def keys() -> tuple[str, str]:
    return mpi_ssh.new_private_key(), mpi_ssh.new_private_key()


def test_a_new_key_is_an_unencrypted_openssh_ed25519_key_each_time(keys):
    client, host = keys
    assert client != host
    for key in keys:
        cipher, kdf, public = openssh_key(key)
        assert (cipher, kdf) == (b"none", b"none")  # it lives in the vault and a 0600 Secret: no passphrase
        assert _strings(public, 0, 1)[0] == [b"ssh-ed25519"]


def test_the_public_key_line_is_openssh_s_with_the_comment(keys):
    client, _ = keys
    assert mpi_ssh.public_key(client, "a b") == public_line(client, "a b")


def test_the_secret_holds_every_file_to_the_byte(keys):
    client, host = keys
    files = mpi_ssh.secret_files(mpi_ssh.keys_json(client, host))
    client_pub = public_line(client, "gridready-mpi-client")
    host_pub = public_line(host, "gridready-mpi-host")
    assert files == {
        "id_ed25519": client,
        "id_ed25519.pub": client_pub + "\n",
        "authorized_keys": client_pub + "\n",
        "ssh_host_ed25519_key": host,
        "ssh_host_ed25519_key.pub": host_pub + "\n",
        "known_hosts": f"* {host_pub}\n",
        "ssh_config": ("Host *\n  Port 2222\n  User root\n  IdentityFile /etc/gridready-mpi/id_ed25519\n"
                       "  IdentitiesOnly yes\n  UserKnownHostsFile /etc/gridready-mpi/known_hosts\n"
                       "  StrictHostKeyChecking yes\n  BatchMode yes\n  ConnectTimeout 10\n"),
    }


def test_keys_json_names_client_and_host():
    assert json.loads(mpi_ssh.keys_json("C", "H")) == {"client": "C", "host": "H"}
    assert mpi_ssh.keys_json("C", "H") == '{"client": "C", "host": "H"}'


def test_a_render_without_the_vault_puts_the_placeholder_in_each_of_the_seven_files():
    text = "<redacted: from the vault at deploy time>"
    assert mpi_ssh.secret_files(text) == dict.fromkeys(
        ["id_ed25519", "id_ed25519.pub", "authorized_keys", "ssh_host_ed25519_key", "ssh_host_ed25519_key.pub",
         "known_hosts", "ssh_config"], text)


def test_keys_that_only_contain_the_placeholder_word_are_read_as_keys(keys):
    # only a value that starts with the placeholder is one; a JSON document is parsed
    with pytest.raises(json.JSONDecodeError):
        mpi_ssh.secret_files("x<redacted")


def test_the_constants_mpirun_and_the_stack_share():
    assert (mpi_ssh.SECRET, mpi_ssh.MOUNT, mpi_ssh.PORT) == ("gridready-mpi-ssh", "/etc/gridready-mpi", 2222)
    assert mpi_ssh.RSH_ARGS == "-F /etc/gridready-mpi/ssh_config"


def test_sshd_runs_in_the_foreground_on_the_tier_port_with_keys_only():
    assert mpi_ssh.sshd_command() == [
        "/usr/sbin/sshd", "-D", "-e", "-p", "2222", "-h", "/etc/gridready-mpi/ssh_host_ed25519_key",
        "-o", "AuthorizedKeysFile=/etc/gridready-mpi/authorized_keys", "-o", "PasswordAuthentication=no",
        "-o", "KbdInteractiveAuthentication=no", "-o", "PermitRootLogin=prohibit-password",
        "-o", "StrictModes=no"]
