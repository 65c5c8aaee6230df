"""library/gridready_openpgp_key.py: the fingerprint of an apt signing key, computed from its packets, agrees with
gpg's own, and a file that holds another key (or the pinned key plus another) is refused. gpg is the witness:
keys are made and fingerprinted by it in a throw-away home."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests import library_modules

MODULE = library_modules.path("gridready_openpgp_key")
pytestmark = pytest.mark.skipif(shutil.which("gpg") is None, reason="gpg makes the test keys")


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return library_modules.load("gridready_openpgp_key")


def _gpg(home: Path, *args: str) -> bytes:
    return subprocess.run(["gpg", "--batch", "--homedir", str(home), *args], check=True, capture_output=True).stdout


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, tuple[str, bytes, bytes]]:
    """name -> (gpg's fingerprint, binary export, armored export), for an ed25519 and an RSA key with a subkey."""
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    out = {}
    try:
        for name, algo in (("ed", "ed25519"), ("rsa", "rsa2048")):
            uid = f"gridready test {name} <{name}@example.invalid>"
            _gpg(home, "--passphrase", "", "--quick-gen-key", uid, algo, "sign", "never")
            colons = _gpg(home, "--with-colons", "--fingerprint", uid).decode()
            fpr = next(line.split(":")[9] for line in colons.splitlines() if line.startswith("fpr:"))
            if name == "rsa":
                _gpg(home, "--passphrase", "", "--quick-add-key", fpr, "ed25519", "sign", "never")
            out[name] = (fpr, _gpg(home, "--export", uid), _gpg(home, "--armor", "--export", uid))
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], check=False)
    return out


@pytest.mark.parametrize("name", ["ed", "rsa"])
def test_fingerprint_agrees_with_gpg_binary_and_armored(mod: ModuleType, keys, name: str) -> None:
    fpr, binary, armored = keys[name]
    assert mod.primary_fingerprints(binary) == [fpr]
    assert mod.primary_fingerprints(armored) == [fpr]
    spaced = " ".join(fpr[i:i + 4] for i in range(0, 40, 4)).lower()  # as gpg --fingerprint prints it
    assert mod.verdict(binary, spaced) is None


def test_another_key_is_refused(mod: ModuleType, keys) -> None:
    ed, rsa = keys["ed"], keys["rsa"]
    wrong = mod.verdict(rsa[1], ed[0])
    assert wrong == f"holds {rsa[0]}, not the pinned key {ed[0]}"


def test_the_pinned_key_with_another_appended_is_refused(mod: ModuleType, keys) -> None:
    ed, rsa = keys["ed"], keys["rsa"]
    wrong = mod.verdict(ed[1] + rsa[1], ed[0])
    assert wrong is not None and "also " + rsa[0] in wrong


@pytest.mark.parametrize("data", [b"", b"<html>mirror error page</html>", b"\x99\x01"])
def test_what_is_not_a_key_is_refused(mod: ModuleType, keys, data: bytes) -> None:
    assert mod.verdict(data, keys["ed"][0]).startswith("not an OpenPGP public key")


def test_the_module_fails_through_ansible_calling_convention(keys, tmp_path: Path) -> None:
    """The module run as Ansible runs it (a JSON args file): exit 0 for the pinned key, failed=true otherwise."""
    key = tmp_path / "keyring.gpg"
    key.write_bytes(keys["ed"][1])
    results = []
    for pin in (keys["ed"][0], keys["rsa"][0]):
        args = tmp_path / "args.json"
        args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"path": str(key), "fingerprint": pin}}))
        proc = subprocess.run([sys.executable, str(MODULE), str(args)], capture_output=True, text=True, check=False)
        results.append(json.loads(proc.stdout))
    assert results[0].get("failed") is not True and results[0]["changed"] is False
    assert results[1]["failed"] is True and "not the pinned key" in results[1]["msg"]
