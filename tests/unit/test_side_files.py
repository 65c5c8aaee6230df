"""Files an inventory or a flag points to besides the YAML (the kubeconfig, the evidence keys, a signed bundle) are
read as regular files of bounded size: a FIFO is refused at once (opening one blocks until a writer comes), a
directory or a huge file is a one-line error naming the key, flag or variable, never an internal error."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gridready import evidence
from gridready.errors import InvalidInput
from gridready.stages import attest
from gridready.stages.serve import deploy as serve_deploy
from gridready.yamlio import MAX_ARTIFACT_BYTES


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _dir(path: Path) -> Path:
    path.mkdir()
    return path


def _huge(path: Path) -> Path:
    with path.open("wb") as fh:
        fh.truncate(8 * 1024 * 1024)  # sparse
    return path


HOSTILE = [("fifo", _fifo, "not a regular file"), ("directory", _dir, "not a regular file"),
           ("huge", _huge, "8388608 bytes, more than the 1048576"),
           ("missing", lambda p: p, "cannot read: No such file or directory")]


def _inv(tmp_path: Path, kubeconfig: str) -> SimpleNamespace:
    return SimpleNamespace(path=tmp_path, spec=SimpleNamespace(serving=SimpleNamespace(kubeconfig=kubeconfig)))


@pytest.mark.parametrize(("make", "message"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_a_kubeconfig_that_is_no_regular_file_names_the_key(tmp_path, monkeypatch, make, message):
    monkeypatch.chdir(tmp_path)
    make(tmp_path / "k.yml")
    with pytest.raises(InvalidInput) as err:
        serve_deploy.kubeconfig(_inv(tmp_path, "k.yml"))
    assert str(err.value).startswith(f"cluster.yml: serving.kubeconfig: {tmp_path / 'k.yml'}: {message}")


def test_a_kubeconfig_is_read_relative_to_the_inventory_and_must_be_utf8(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.yml").write_text("apiVersion: v1\nkind: Config\n")
    assert serve_deploy.kubeconfig(_inv(tmp_path, "k.yml")) == "apiVersion: v1\nkind: Config\n"
    (tmp_path / "k.yml").write_bytes(b"apiVersion: v1\n\xff\n")
    with pytest.raises(InvalidInput, match=r"serving\.kubeconfig: .*k\.yml: not UTF-8 \(byte 15\)$"):
        serve_deploy.kubeconfig(_inv(tmp_path, "k.yml"))


@pytest.mark.parametrize(("make", "message"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_a_public_key_that_is_no_regular_file_names_its_source(tmp_path, make, message):
    path = make(tmp_path / "evidence.pub")
    with pytest.raises(InvalidInput) as err:
        evidence.load_public_key(path, "--key")
    assert str(err.value).startswith(f"--key: {path}: {message}")


def test_a_public_key_must_be_ed25519_pem(tmp_path):
    path = tmp_path / "evidence.pub"
    path.write_bytes(b"ssh-ed25519 AAAA not pem\n")
    with pytest.raises(InvalidInput, match=r"not a PEM ed25519 key$"):
        evidence.load_public_key(path, "--key")
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    path.write_bytes(other.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    with pytest.raises(InvalidInput, match=r"the key is not ed25519$"):
        evidence.load_public_key(path, "--key")
    mine = Ed25519PrivateKey.generate()
    path.write_bytes(mine.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()))
    assert evidence.load_public_key(path, "--key") == mine.public_key()


@pytest.mark.parametrize(("make", "message"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_a_signing_key_path_that_is_no_regular_file_names_the_variable_not_the_path(tmp_path, make, message):
    path = make(tmp_path / "signing.pem")
    with pytest.raises(InvalidInput) as err:
        evidence.load_private_key({evidence.KEY_ENV: str(path)})
    assert str(err.value).startswith(f"{evidence.KEY_ENV}: (environment): the path it names: {message}")
    assert str(tmp_path) not in str(err.value)


def _past_the_artifact_cap(path: Path) -> Path:
    with path.open("wb") as fh:
        fh.truncate(MAX_ARTIFACT_BYTES + 1)  # sparse
    return path


ARTIFACT = [*HOSTILE[:2], ("huge", _past_the_artifact_cap, f"{MAX_ARTIFACT_BYTES + 1} bytes, more than the "),
            HOSTILE[3]]


@pytest.mark.parametrize(("make", "message"), [h[1:] for h in ARTIFACT], ids=[h[0] for h in ARTIFACT])
def test_a_bundle_that_is_no_regular_file_is_one_problem(tmp_path, make, message):
    path = make(tmp_path / "statement.dsse.json")
    got, problems = evidence.verify(path, Ed25519PrivateKey.generate().public_key())
    assert got is None and len(problems) == 1 and problems[0].startswith(f"{path}: {message}")


@pytest.mark.parametrize("make", [h[1] for h in ARTIFACT], ids=[h[0] for h in ARTIFACT])
def test_a_machine_probe_that_is_no_regular_file_is_unreadable(tmp_path, make):
    assert attest._probe(make(tmp_path / "probe.json")) is None


def test_a_machine_probe_of_several_mib_is_read(tmp_path):
    """An 8-GPU probe.json with DCGM level 3 runs to a few MiB: more than an inventory file, still read."""
    doc = {"gpus": [{"index": i, "samples": list(range(100_000))} for i in range(8)]}
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(doc))
    assert path.stat().st_size > 4 << 20 and attest._probe(path) == doc
    path.write_text("[1, 2]")
    assert attest._probe(path) is None
