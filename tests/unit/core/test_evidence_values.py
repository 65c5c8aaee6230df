"""gridready.evidence by value: the canonical bytes, the machine identity a probe gives, the exact in-toto Statement,
DSSE's pre-authentication encoding, the key id, a signed envelope and every refusal of `verify`, in process.

Expected bytes are computed here from the specifications, not by the module: in-toto Statement v1
(https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md) and DSSE v1
(https://github.com/secure-systems-lab/dsse/blob/master/protocol.md: PAE(type, body) = "DSSEv1" SP LEN(type) SP
type SP LEN(body) SP body, LEN in ASCII decimal of the byte length).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from gridready import evidence
from gridready.errors import InvalidInput

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "h200x2" / "probe_quick.json"
GPU0 = {"uuid": "GPU-2985e854-40cd-f248-81fa-d0a07042f66d", "serial": "1653924041879", "vbios": "96.00.A5.00.1A",
        "bus_id": "00000000:00:06.0", "name": "NVIDIA H200"}
GPU1 = {"uuid": "GPU-28f0fa35-a07c-baa4-279e-c95565b18935", "serial": "1653924043475", "vbios": "96.00.A5.00.1A",
        "bus_id": "00000000:00:07.0", "name": "NVIDIA H200"}
NO_FILE = "cannot read: No such file or directory"


def dsse_pae(payload_type: str, body: bytes) -> bytes:
    """protocol.md's PAE, written from its text."""
    t = payload_type.encode("utf-8")
    return b" ".join([b"DSSEv1", str(len(t)).encode("ascii"), t, str(len(body)).encode("ascii"), body])


def probe() -> dict:
    """The real 2x H200 probe capture, with two HCAs and DMI serials the capture lacks (sysfs and dmi as the probe
    writes them)."""
    doc = json.loads(FIXTURE.read_text())
    doc["hca"]["sysfs"] = {"mlx5_1": {"fw_ver": "28.39.1002", "board_id": "MT_0000000838", "rate": "400 Gb/sec"},
                           "mlx5_0": {"fw_ver": "28.39.1002", "board_id": "MT_0000000838", "state": "ACTIVE"}}
    doc["system"]["dmi"] = {"product_serial": "S1", "board_serial": "B1", "product_name": "PowerEdge XE9680"}
    return doc


def pem_public(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def pem_private(key, password: bytes | None = None) -> bytes:
    crypt = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, crypt)


def raw(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


# ---- canonical, sha256, identity_digest

def test_canonical_sorts_keys_at_every_depth_without_spaces_and_escapes_non_ascii():
    got = evidence.canonical({"b": [2, {"z": 1, "a": "é"}], "a": None, "c": True})
    assert got == b'{"a":null,"b":[2,{"a":"\\u00e9","z":1}],"c":true}'


def test_sha256_is_the_hex_digest_of_the_bytes():
    assert evidence.sha256(b"abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # FIPS 180-2


def test_identity_digest_is_the_sha256_of_the_canonical_form():
    assert evidence.identity_digest({"b": 1, "a": "x"}) == hashlib.sha256(b'{"a":"x","b":1}').hexdigest()
    assert evidence.identity_digest({"a": "x", "b": 1}) == evidence.identity_digest({"b": 1, "a": "x"})


# ---- machine_identity

def test_machine_identity_of_a_real_probe_keeps_names_and_never_measurements():
    ident = evidence.machine_identity(probe())
    assert ident == {
        "gpus": [GPU0, GPU1], "driver_version": "580.159.04", "cuda_version": "13.0",
        "hcas": {"mlx5_0": {"fw_ver": "28.39.1002", "board_id": "MT_0000000838"},
                 "mlx5_1": {"fw_ver": "28.39.1002", "board_id": "MT_0000000838"}},
        "dmi": {"board_serial": "B1", "product_name": "PowerEdge XE9680", "product_serial": "S1"}}
    assert list(ident["hcas"]) == ["mlx5_0", "mlx5_1"]


def test_machine_identity_orders_gpus_by_bus_id_whatever_the_probe_order():
    doc = probe()
    doc["nvidia_smi"]["q"]["gpus"].reverse()
    assert evidence.machine_identity(doc)["gpus"] == [GPU0, GPU1]


def test_machine_identity_reads_the_csv_query_when_the_q_parse_is_empty():
    doc = probe()
    doc["nvidia_smi"]["q"]["gpus"] = []
    doc["nvidia_smi"]["query"].reverse()
    gpus = evidence.machine_identity(doc)["gpus"]
    # the CSV query's own keys (vbios_version, pci.bus_id) and its serial as an integer
    assert gpus == [{**GPU0, "serial": 1653924041879}, {**GPU1, "serial": 1653924043475}]


def test_machine_identity_prefers_the_q_parse_over_the_query():
    doc = probe()
    doc["nvidia_smi"]["query"] = [{"uuid": "GPU-other", "pci.bus_id": "00000000:00:01.0"}]
    assert [g["uuid"] for g in evidence.machine_identity(doc)["gpus"]] == [GPU0["uuid"], GPU1["uuid"]]


def test_machine_identity_of_nothing_or_missing_sections_is_empty():
    empty = {"gpus": [], "driver_version": None, "cuda_version": None, "hcas": {}, "dmi": {}}
    assert evidence.machine_identity(None) == empty
    assert evidence.machine_identity({}) == empty
    assert evidence.machine_identity({"nvidia_smi": None, "hca": None, "system": None}) == empty
    assert evidence.machine_identity({"nvidia_smi": {"q": None, "query": None}, "hca": {"sysfs": None},
                                      "system": {"dmi": None}}) == empty
    assert evidence.machine_identity({"nvidia_smi": {"q": {"gpus": None}}}) == empty


def test_machine_identity_keeps_an_hca_with_firmware_or_board_id_only():
    doc = probe()
    doc["hca"]["sysfs"] = {"mlx5_0": {"fw_ver": "28.1"}, "mlx5_1": {"board_id": "MT_1"},
                           "mlx5_2": {"state": "ACTIVE", "rate": "400 Gb/sec"}, "bond0": ["fw_ver"]}
    assert evidence.machine_identity(doc)["hcas"] == {"mlx5_0": {"fw_ver": "28.1", "board_id": None},
                                                      "mlx5_1": {"fw_ver": None, "board_id": "MT_1"}}


def test_machine_identity_drops_only_an_empty_product_name():
    doc = probe()
    doc["system"]["dmi"] = {"product_name": "", "board_serial": "", "product_serial": "S1"}
    assert evidence.machine_identity(doc)["dmi"] == {"board_serial": "", "product_serial": "S1"}
    doc["system"]["dmi"] = {"product_name": None, "chassis_serial": None}
    assert evidence.machine_identity(doc)["dmi"] == {"chassis_serial": None}


# ---- statement

def _reports(base: Path) -> dict[str, Path]:
    (base / "nodes" / "gpu01").mkdir(parents=True)
    (base / "probes" / "gpu01").mkdir(parents=True)
    (base / "nodes" / "gpu01" / "certification.json").write_bytes(b'{"certified": true}\n')
    (base / "probes" / "gpu01" / "probe.json").write_bytes(b'{"schema": 1}\n')
    (base / "junit.xml").write_bytes(b"<testsuites/>\n")
    # keys out of their sorted order, and sorted otherwise than their paths
    return {"z_junit": base / "junit.xml", "probe": base / "probes" / "gpu01" / "probe.json",
            "certification": base / "nodes" / "gpu01" / "certification.json"}


VERDICT = {"profile": "quick", "certified": False, "judged_at": "2026-12-01T00:00:00+00:00",
           "valid_until": "2026-12-08T00:00:00+00:00", "blocking": ["pcie: gen 4 < 5"], "simulated": 1,
           "gates": [{"gate": "pcie", "gpu": 0, "status": "failed", "reason": "gen 4 < 5", "value": 4.0,
                      "waived": False},
                     {"gate": "rdma", "hca": "mlx5_0", "status": "passed"}]}


def test_statement_is_the_in_toto_v1_statement_of_the_machine_and_its_reports(tmp_path):
    ident = evidence.machine_identity(probe())
    stmt = evidence.statement("gpu01", ident, VERDICT, _reports(tmp_path), tmp_path, customer="acme",
                              run_id="20261201T000000Z-abcd")
    digest = hashlib.sha256(evidence.canonical(ident)).hexdigest()
    assert stmt.model_dump(by_alias=True, exclude_none=True) == {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "machine:gpu01", "digest": {"sha256": digest}, "annotations": ident}],
        "predicateType": "https://gridready.dev/certification/v1",
        "predicate": {
            "node": "gpu01", "customer": "acme", "run_id": "20261201T000000Z-abcd", "profile": "quick",
            "certified": False, "judged_at": "2026-12-01T00:00:00+00:00", "valid_until": "2026-12-08T00:00:00+00:00",
            "blocking": ["pcie: gen 4 < 5"], "simulated": True,
            "gates": [{"gate": "pcie", "gpu": 0, "hca": None, "status": "failed", "waived": False,
                       "reason": "gen 4 < 5"},
                      {"gate": "rdma", "gpu": None, "hca": "mlx5_0", "status": "passed", "waived": None,
                       "reason": None}],
            "reports": [
                {"name": "nodes/gpu01/certification.json",
                 "digest": {"sha256": hashlib.sha256(b'{"certified": true}\n').hexdigest()}},
                {"name": "probes/gpu01/probe.json",
                 "digest": {"sha256": hashlib.sha256(b'{"schema": 1}\n').hexdigest()}},
                {"name": "junit.xml", "digest": {"sha256": hashlib.sha256(b"<testsuites/>\n").hexdigest()}}]}}
    assert stmt.predicate["simulated"] is True


def test_statement_defaults_of_a_bare_verdict(tmp_path):
    stmt = evidence.statement("n1", {}, {}, {}, tmp_path, customer=None, run_id=None)
    assert stmt.predicate == {"node": "n1", "customer": None, "run_id": None, "profile": None, "certified": None,
                              "judged_at": None, "valid_until": None, "blocking": [], "simulated": False,
                              "gates": [], "reports": []}
    assert stmt.predicate["simulated"] is False
    assert stmt.subject[0].digest == {"sha256": hashlib.sha256(b"{}").hexdigest()}


def test_statement_refuses_a_report_that_is_a_link_even_inside_the_folder(tmp_path):
    reports = _reports(tmp_path)
    (tmp_path / "link.json").symlink_to(tmp_path / "junit.xml")
    with pytest.raises(evidence.safefile.UnsafeFile, match="symbolic link"):
        evidence.statement("gpu01", {}, VERDICT, {**reports, "z_junit": tmp_path / "link.json"}, tmp_path,
                           customer="acme", run_id="r")
    # nor one whose name climbs out of the folder, though the file is there
    (tmp_path.parent / f"{tmp_path.name}-out.xml").write_bytes(b"<testsuites/>\n")
    with pytest.raises(evidence.safefile.UnsafeFile, match=f"outside {tmp_path.name}/"):
        evidence.statement("gpu01", {}, VERDICT, {"junit": tmp_path / f"../{tmp_path.name}-out.xml"}, tmp_path,
                           customer="acme", run_id="r")


# ---- pae, key_id, sign

def test_pae_is_dsse_v1s_encoding_with_byte_lengths():
    assert evidence.pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world")  # protocol.md's own example
    body = "{\"é\": 1}".encode()
    assert evidence.pae("application/vnd.é+json", body) == dsse_pae("application/vnd.é+json", body)
    assert evidence.pae("application/vnd.é+json", body).startswith(b"DSSEv1 23 ")
    assert evidence.pae("", b"") == b"DSSEv1 0  0 "


def test_key_id_is_ed25519_and_the_first_128_bits_of_the_raw_keys_sha256():
    key = Ed25519PrivateKey.generate()
    want = "ed25519:" + hashlib.sha256(raw(key.public_key())).hexdigest()[:32]
    assert evidence.key_id(key.public_key()) == want
    assert len(want) == 40


def test_sign_makes_one_dsse_signature_over_the_pae_of_the_statement(tmp_path):
    key = Ed25519PrivateKey.generate()
    stmt = evidence.Statement(subject=[evidence.ResourceDescriptor(name="machine:n", digest={"sha256": "ab"})],
                              predicate={"node": "n", "run_id": None})
    env = evidence.sign(stmt, key)
    body = base64.b64decode(env.payload)
    assert json.loads(body) == {"_type": "https://in-toto.io/Statement/v1",
                                "subject": [{"name": "machine:n", "digest": {"sha256": "ab"}}],
                                "predicateType": "https://gridready.dev/certification/v1",
                                "predicate": {"node": "n", "run_id": None}}
    assert env.payloadType == "application/vnd.in-toto+json"
    assert [s.keyid for s in env.signatures] == [evidence.key_id(key.public_key())]
    # ed25519 is deterministic: the signature is exactly the one over the spec's PAE
    assert base64.b64decode(env.signatures[0].sig) == key.sign(dsse_pae("application/vnd.in-toto+json", body))
    assert json.loads(env.model_dump_json()) == {"payloadType": "application/vnd.in-toto+json",
                                                 "payload": env.payload, "signatures": [
                                                     {"keyid": env.signatures[0].keyid, "sig": env.signatures[0].sig}]}


# ---- load_private_key, load_public_key

def test_load_private_key_unset_or_empty_is_none():
    assert evidence.load_private_key({}) is None
    assert evidence.load_private_key({"GRIDREADY_EVIDENCE_KEY": ""}) is None


def test_load_private_key_reads_the_path_the_environment_names(tmp_path, monkeypatch):
    key = Ed25519PrivateKey.generate()
    (tmp_path / "k.pem").write_bytes(pem_private(key))
    got = evidence.load_private_key({"GRIDREADY_EVIDENCE_KEY": str(tmp_path / "k.pem")})
    assert raw(got.public_key()) == raw(key.public_key())
    monkeypatch.setenv("GRIDREADY_EVIDENCE_KEY", str(tmp_path / "k.pem"))
    assert raw(evidence.load_private_key().public_key()) == raw(key.public_key())
    monkeypatch.delenv("GRIDREADY_EVIDENCE_KEY")
    assert evidence.load_private_key() is None


def _private_error(tmp_path: Path, content: bytes | None) -> list[str]:
    path = tmp_path / "k.pem"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InvalidInput) as err:
        evidence.load_private_key({"GRIDREADY_EVIDENCE_KEY": str(path)})
    assert err.value.code == 2
    return err.value.lines


def test_load_private_key_refusals_name_the_variable(tmp_path):
    head = "GRIDREADY_EVIDENCE_KEY: (environment): "
    assert _private_error(tmp_path, None) == [head + "the path it names: " + NO_FILE]
    assert _private_error(tmp_path, b"not a key\n") == [
        head + "cannot read an unencrypted PEM private key at the path it names (ValueError)"]
    assert _private_error(tmp_path, pem_private(Ed25519PrivateKey.generate(), b"pw")) == [
        head + "cannot read an unencrypted PEM private key at the path it names (TypeError)"]
    assert _private_error(tmp_path, pem_private(ec.generate_private_key(ec.SECP256R1()))) == [
        head + "the key is not ed25519"]


def test_load_public_key_takes_a_public_key_or_the_public_half_of_a_private_one(tmp_path):
    key = Ed25519PrivateKey.generate()
    (tmp_path / "k.pub").write_bytes(pem_public(key))
    (tmp_path / "k.pem").write_bytes(pem_private(key))
    assert raw(evidence.load_public_key(tmp_path / "k.pub", "--key")) == raw(key.public_key())
    assert raw(evidence.load_public_key(tmp_path / "k.pem", "--key")) == raw(key.public_key())


@pytest.mark.parametrize(("content", "says"), [
    (None, NO_FILE),
    (b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "not a PEM ed25519 key"),
    ("encrypted", "not a PEM ed25519 key"),
    ("ec-public", "the key is not ed25519"),
    ("ec-private", "the key is not ed25519"),
])
def test_load_public_key_refusals_name_the_source_and_path(tmp_path, content, says):
    path = tmp_path / "k.pub"
    other = ec.generate_private_key(ec.SECP256R1())
    data = {"encrypted": pem_private(Ed25519PrivateKey.generate(), b"pw"), "ec-private": pem_private(other),
            "ec-public": other.public_key().public_bytes(serialization.Encoding.PEM,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo)}
    if content is not None:
        path.write_bytes(data.get(content, content) if isinstance(content, str) else content)
    with pytest.raises(InvalidInput) as err:
        evidence.load_public_key(path, "GRIDREADY_EVIDENCE_PUBKEY")
    assert err.value.lines == [f"GRIDREADY_EVIDENCE_PUBKEY: {path}: {says}"]


# ---- write_bundle

def test_write_bundle_writes_the_unsigned_statement_or_the_envelope(tmp_path):
    key = Ed25519PrivateKey.generate()
    stmt = evidence.Statement(subject=[evidence.ResourceDescriptor(name="machine:n", digest={"sha256": "ab"})],
                              predicate={"node": "n"})
    plain = evidence.write_bundle(tmp_path / "a", None, stmt)
    assert plain == tmp_path / "a" / "statement.json"
    text = plain.read_text()
    assert text.startswith('{\n  "_type": "https://in-toto.io/Statement/v1",\n') and text.endswith("}\n")
    assert json.loads(text)["subject"] == [{"name": "machine:n", "digest": {"sha256": "ab"}, "annotations": None}]
    env = evidence.sign(stmt, key)
    signed = evidence.write_bundle(tmp_path / "b", env, stmt)
    assert signed == tmp_path / "b" / "statement.dsse.json"
    text = signed.read_text()
    assert text.startswith('{\n  "payloadType": "application/vnd.in-toto+json",\n') and text.endswith("}\n")
    assert json.loads(text)["payload"] == env.payload
    assert not (tmp_path / "b" / "statement.json").exists()


# ---- verify

IDENT = {"gpus": [{"uuid": "GPU-a"}, {"uuid": "GPU-b"}], "driver_version": "580.1", "dmi": {"board_serial": "B1"}}


def _bundle(tmp_path: Path, key: Ed25519PrivateKey, ident=IDENT, node: str = "gpu01") -> tuple[Path, Path]:
    """A certify folder as attest leaves it: reports under the stage, the envelope at evidence/<node>/."""
    stage = tmp_path / "certify"
    reports = _reports(stage)
    stmt = evidence.statement(node, ident, VERDICT, reports, stage, customer="acme", run_id="r")
    return evidence.write_bundle(stage / "evidence" / node, evidence.sign(stmt, key), stmt), stage


def _envelope(tmp_path: Path, body: bytes, key: Ed25519PrivateKey, payload_type: str = evidence.PAYLOAD_TYPE,
              keyid: str = "k") -> Path:
    """An envelope signed over `body` as given (shapes `statement` never makes)."""
    sig = base64.b64encode(key.sign(dsse_pae(payload_type, body))).decode()
    path = tmp_path / "certify" / "evidence" / "n" / "statement.dsse.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"payloadType": evidence.PAYLOAD_TYPE, "payload": base64.b64encode(body).decode(),
                                "signatures": [{"keyid": keyid, "sig": sig}]}))
    return path


def test_verify_accepts_its_own_bundle_with_reports_under_the_certify_folder(tmp_path):
    key = Ed25519PrivateKey.generate()
    path, stage = _bundle(tmp_path, key)
    stmt, problems = evidence.verify(path, key.public_key(), identity=copy.deepcopy(IDENT), node="gpu01")
    assert problems == []
    assert stmt is not None and stmt.subject[0].name == "machine:gpu01"
    assert [r["name"] for r in stmt.predicate["reports"]] == ["nodes/gpu01/certification.json",
                                                              "probes/gpu01/probe.json", "junit.xml"]
    assert evidence.verify(path, key.public_key(), base=stage) == (stmt, [])


def test_verify_refuses_another_key_naming_both(tmp_path):
    key, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    path, _ = _bundle(tmp_path, key)
    assert evidence.verify(path, other.public_key()) == (None, [
        f"{path}: signatures: no valid signature by {evidence.key_id(other.public_key())} "
        f"(signed by {evidence.key_id(key.public_key())})"])


def test_verify_takes_any_one_valid_signature_and_names_all_when_none_is(tmp_path):
    key, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    path, _ = _bundle(tmp_path, key)
    env = json.loads(path.read_text())
    good = env["signatures"][0]
    env["signatures"] = [{"keyid": "bad-b64", "sig": "%%%"}, {"keyid": "short", "sig": "AAAA"}, good]
    path.write_text(json.dumps(env))
    assert evidence.verify(path, key.public_key())[1] == []
    env["signatures"] = []
    path.write_text(json.dumps(env))
    assert evidence.verify(path, key.public_key())[1] == [
        f"{path}: signatures: no valid signature by {evidence.key_id(key.public_key())} (signed by none)"]
    env["signatures"] = [{"keyid": "x", "sig": good["sig"]}, {"keyid": "y", "sig": "AAAA"}]
    path.write_text(json.dumps(env))
    assert evidence.verify(path, other.public_key())[1] == [
        f"{path}: signatures: no valid signature by {evidence.key_id(other.public_key())} (signed by x, y)"]


def test_verify_refuses_a_changed_payload_byte(tmp_path):
    key = Ed25519PrivateKey.generate()
    path, _ = _bundle(tmp_path, key)
    env = json.loads(path.read_text())
    body = base64.b64decode(env["payload"]).replace(b'"certified":false', b'"certified":true ')
    env["payload"] = base64.b64encode(body).decode()
    path.write_text(json.dumps(env))
    stmt, problems = evidence.verify(path, key.public_key())
    assert stmt is None and len(problems) == 1 and " signatures: no valid signature by " in problems[0]


def test_verify_refuses_a_signature_over_another_payload_type(tmp_path):
    key = Ed25519PrivateKey.generate()
    body = b'{"_type":"https://in-toto.io/Statement/v1","subject":[],"predicate":{}}'
    path = _envelope(tmp_path, body, key, payload_type="application/json")
    assert evidence.verify(path, key.public_key())[0] is None
    assert evidence.verify(_envelope(tmp_path, body, key), key.public_key())[0] is not None


def test_verify_refuses_an_unreadable_or_malformed_envelope(tmp_path):
    key = Ed25519PrivateKey.generate()
    path = tmp_path / "e.json"
    assert evidence.verify(path, key.public_key()) == (None, [f"{path}: {NO_FILE}"])
    path.write_text("[]")
    assert evidence.verify(path, key.public_key()) == (None, [f"{path}: (file): Input should be an object"])
    path.write_text(json.dumps({"payloadType": "text/plain"}))
    assert evidence.verify(path, key.public_key()) == (None, [
        f"{path}: payloadType: Input should be 'application/vnd.in-toto+json'"])
    path.write_text(json.dumps({"payloadType": evidence.PAYLOAD_TYPE, "payload": "!!not base64!!",
                                "signatures": []}))
    assert evidence.verify(path, key.public_key()) == (None, [f"{path}: payload: not base64"])
    # characters outside the alphabet are refused, not skipped ("aGVsbG8h" alone is b"hello!")
    path.write_text(json.dumps({"payloadType": evidence.PAYLOAD_TYPE, "payload": "aGVs!bG8h",
                                "signatures": [{"keyid": "k", "sig": "AAAA"}]}))
    assert evidence.verify(path, key.public_key()) == (None, [f"{path}: payload: not base64"])
    # a key path below the top names every step
    path.write_text(json.dumps({"payloadType": evidence.PAYLOAD_TYPE, "payload": "", "signatures": [{"keyid": "k"}]}))
    assert evidence.verify(path, key.public_key()) == (None, [f"{path}: signatures.0.sig: Field required"])


def test_verify_refuses_a_signed_payload_that_is_not_a_statement(tmp_path):
    key = Ed25519PrivateKey.generate()
    path = _envelope(tmp_path, b'{"_type":"x","subject":[],"predicate":1}', key)
    assert evidence.verify(path, key.public_key()) == (None, [
        f"{path}: payload: not an in-toto Statement v1 (Input should be 'https://in-toto.io/Statement/v1')"])


def test_verify_flags_another_predicate_type_and_an_empty_subject(tmp_path):
    key = Ed25519PrivateKey.generate()
    body = json.dumps({"_type": "https://in-toto.io/Statement/v1", "subject": [],
                       "predicateType": "https://slsa.dev/provenance/v1", "predicate": {}}).encode()
    path = _envelope(tmp_path, body, key)
    stmt, problems = evidence.verify(path, key.public_key(), node="n", identity={})
    assert stmt is not None and stmt.predicateType == "https://slsa.dev/provenance/v1"
    assert problems == [
        f"{path}: predicateType: 'https://slsa.dev/provenance/v1' is not 'https://gridready.dev/certification/v1'",
        f"{path}: subject: empty"]


def test_verify_names_a_changed_and_a_missing_report(tmp_path):
    key = Ed25519PrivateKey.generate()
    path, stage = _bundle(tmp_path, key)
    (stage / "junit.xml").write_bytes(b"<testsuites/>\r\n")
    (stage / "probes" / "gpu01" / "probe.json").unlink()
    stmt, problems = evidence.verify(path, key.public_key())
    got = hashlib.sha256(b"<testsuites/>\r\n").hexdigest()[:16]
    signed = hashlib.sha256(b"<testsuites/>\n").hexdigest()[:16]
    assert stmt is not None
    assert problems == [f"{stage / 'probes/gpu01/probe.json'}: missing (the statement names it)",
                        f"{stage / 'junit.xml'}: sha256 {got}... differs from the signed {signed}..."]


def test_verify_reads_reports_beneath_base_only_never_through_a_link(tmp_path):
    key = Ed25519PrivateKey.generate()
    path, stage = _bundle(tmp_path, key)
    (stage / "junit.xml").unlink()
    (tmp_path / "elsewhere.xml").write_bytes(b"<testsuites/>\n")
    (stage / "junit.xml").symlink_to(tmp_path / "elsewhere.xml")
    assert evidence.verify(path, key.public_key())[1] == [
        f"{stage / 'junit.xml'}: cannot read: a symbolic link, which is never followed here (or a loop of links)"]
    # a name that climbs out of base is refused unread, even where the file it names holds the signed bytes
    body = json.dumps({"_type": "https://in-toto.io/Statement/v1",
                       "subject": [{"name": "machine:n", "digest": {"sha256": "x"}}], "predicate": {"reports": [
                           {"name": "../elsewhere.xml",
                            "digest": {"sha256": hashlib.sha256(b"<testsuites/>\n").hexdigest()}}]},
                       "predicateType": evidence.PREDICATE_TYPE}).encode()
    out = _envelope(tmp_path, body, key)
    assert evidence.verify(out, key.public_key())[1] == [
        f"{stage / '../elsewhere.xml'}: outside certify/, refused unread"]
    assert evidence.verify(out, key.public_key(), base=tmp_path / "x")[1] == [
        f"{tmp_path / 'x/../elsewhere.xml'}: outside x/, refused unread"]


def test_verify_checks_the_node_and_the_subjects_annotations(tmp_path):
    key = Ed25519PrivateKey.generate()
    path, _ = _bundle(tmp_path, key)
    assert evidence.verify(path, key.public_key(), node="gpu02")[1] == [
        f"{path}: subject: 'machine:gpu01' is not machine:gpu02"]
    body = json.dumps({"_type": "https://in-toto.io/Statement/v1", "predicateType": evidence.PREDICATE_TYPE,
                       "subject": [{"name": "machine:n", "digest": {"sha256": evidence.identity_digest(IDENT)},
                                    "annotations": {**IDENT, "driver_version": "999"}}],
                       "predicate": {}}).encode()
    tampered = _envelope(tmp_path, body, key)
    assert evidence.verify(tampered, key.public_key(), node="n", identity=IDENT)[1] == [
        f"{tampered}: subject: annotations do not match the subject's digest"]


def test_verify_names_how_another_machine_differs(tmp_path):
    key = Ed25519PrivateKey.generate()
    path, _ = _bundle(tmp_path, key)
    swapped = {**IDENT, "gpus": [{"uuid": "GPU-a"}, {"uuid": "GPU-z"}]}
    assert evidence.verify(path, key.public_key(), identity=swapped)[1] == [
        f"{path}: subject: names another machine than the one given (GPU UUIDs ['GPU-z'] not in the signed "
        "machine; signed GPU UUIDs ['GPU-b'] not in this machine)"]
    # a bare subject (no annotations) still compares by digest
    body = json.dumps({"_type": "https://in-toto.io/Statement/v1", "predicateType": evidence.PREDICATE_TYPE,
                       "subject": [{"name": "machine:n", "digest": {"sha256": evidence.identity_digest(IDENT)}}],
                       "predicate": {}}).encode()
    bare = _envelope(tmp_path, body, key)
    assert evidence.verify(bare, key.public_key(), identity=IDENT)[1] == []
    assert evidence.verify(bare, key.public_key(), identity=swapped)[1] == [
        f"{bare}: subject: names another machine than the one given (GPU UUIDs ['GPU-a', 'GPU-z'] not in the "
        "signed machine)"]


# ---- _difference

def test_difference_names_the_signed_gpus_a_machine_lost() -> None:
    """A machine with fewer GPUs than it was signed with (one fell off the bus) says which; one with a GPU swapped
    says both."""
    signed = {"gpus": [{"uuid": "GPU-b"}, {"uuid": "GPU-a"}, {"uuid": "GPU-c"}]}
    assert evidence._difference(signed, {"gpus": [{"uuid": "GPU-a"}]}) == (
        "signed GPU UUIDs ['GPU-b', 'GPU-c'] not in this machine")
    assert evidence._difference(signed, {"gpus": [{"uuid": "GPU-a"}, {"uuid": "GPU-b"}, {"uuid": "GPU-z"}]}) == (
        "GPU UUIDs ['GPU-z'] not in the signed machine; signed GPU UUIDs ['GPU-c'] not in this machine")


def test_difference_names_new_gpus_sorted_then_the_differing_keys():
    signed = {"gpus": [{"uuid": "GPU-a"}, {"uuid": "GPU-b"}], "driver_version": "580", "dmi": {"s": "1"}}
    assert evidence._difference(signed, {**signed, "gpus": [{"uuid": "GPU-d"}, {"uuid": "GPU-b"},
                                                             {"uuid": "GPU-c"}]}) == (
        "GPU UUIDs ['GPU-c', 'GPU-d'] not in the signed machine; signed GPU UUIDs ['GPU-a'] not in this machine")
    assert evidence._difference(signed, {**signed, "gpus": [{"uuid": "GPU-b"}, {}]}) == (
        "GPU UUIDs ['None'] not in the signed machine; signed GPU UUIDs ['GPU-a'] not in this machine")
    assert evidence._difference(signed, {"gpus": [{"uuid": "GPU-b"}, {"uuid": "GPU-a"}], "driver_version": "590",
                                         "dmi": {"s": "2"}, "hcas": {}}) == "differs in dmi, driver_version, gpus, hcas"
    assert evidence._difference(signed, {**signed, "hcas": None}) == "identity differs"  # None reads as absent
    assert evidence._difference({}, {"driver_version": "1"}) == "differs in driver_version"
    assert evidence._difference({"driver_version": "1"}, {}) == "differs in driver_version"


def test_verify_reads_a_bundle_larger_than_an_inventory_file(tmp_path):
    """A bundle may exceed the 1 MiB of an inventory file (an 8-GPU machine's annotations, many reports): verify
    reads up to MAX_ARTIFACT_BYTES."""
    key = Ed25519PrivateKey.generate()
    ident = {**IDENT, "dmi": {"note": "x" * (1 << 20)}}
    path, _ = _bundle(tmp_path, key, ident=ident)
    assert path.stat().st_size > 1 << 20
    stmt, problems = evidence.verify(path, key.public_key(), identity=ident)
    assert problems == [] and stmt is not None
