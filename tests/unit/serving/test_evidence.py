"""Standard and signed evidence (issue 31): CTRF beside JUnit, one in-toto Statement per node signed with ed25519,
and `invoke evidence verify` refusing a changed byte or another machine."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path

import jsonschema
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gridready import evidence, ledger
from gridready.artifacts import RunContext, write_json_atomic
from gridready.certify.judge import judge_fleet, judge_node
from gridready.errors import InvalidInput
from gridready.report import write_all
from gridready.stages import attest
from gridready.stages import certify as certify_stage
from tests.unit.certify.fixtures_io import group, probe_quick, spec

S = spec(not_applicable=["dcgm", "peermem"])
RUN = "20261130T030000Z-abcd"
STATUS = ["passed", "failed", "skipped", "pending", "other"]
# The shape CTRF's specification (https://ctrf.io/docs/specification) requires of a report, written from its
# documented rules: reportFormat "CTRF", a SemVer specVersion, results.tool.name, the eight summary counts and
# times, and per test name, one of the five statuses and an integer duration (ms).
CTRF_REQUIRED = {
    "type": "object", "required": ["reportFormat", "specVersion", "results"],
    "properties": {
        "reportFormat": {"const": "CTRF"}, "specVersion": {"type": "string", "pattern": r"^[0-9]+\.[0-9]+\.[0-9]+$"},
        "results": {"type": "object", "required": ["tool", "summary", "tests"], "properties": {
            "tool": {"type": "object", "required": ["name"],
                     "properties": {"name": {"type": "string", "minLength": 1}}},
            "summary": {"type": "object", "required": ["tests", "passed", "failed", "skipped", "pending", "other",
                                                       "start", "stop"],
                        "additionalProperties": {"type": ["integer", "object"]}},
            "tests": {"type": "array", "items": {"type": "object", "required": ["name", "status", "duration"],
                                                 "properties": {"name": {"type": "string", "minLength": 1},
                                                                "status": {"enum": STATUS},
                                                                "duration": {"type": "integer"},
                                                                "suite": {"type": "array", "minItems": 1}}}}}},
    },
}


def _certify_dir(tmp_path: Path, key: Ed25519PrivateKey | None, nodes: tuple[str, ...] = ("gpu01", "gpu02")):
    """A certify stage folder as certify.run leaves it: probes, reports, and each node's statement."""
    bad = copy.deepcopy(probe_quick())
    bad["torch"]["gpus"][0]["h2d_gbps"] = 12.0
    docs = {nodes[0]: probe_quick(), nodes[1]: bad}
    ctx = RunContext(customer="acme", run_id=RUN, root=tmp_path / "artifacts")
    stage = ctx.stage_dir("certify")
    for node, doc in docs.items():
        doc = copy.deepcopy(doc)
        for i, g in enumerate(doc["nvidia_smi"]["q"]["gpus"]):  # each machine its own GPUs
            g["uuid"] = f"GPU-{node}-{i}"
        write_json_atomic(stage / "probes" / node / "probe.json", doc)
        docs[node] = doc
    verdicts = [judge_node(S, group(), d, node=n, evidence=f"probes/{n}/probe.json") for n, d in docs.items()]
    fleet = judge_fleet(S, verdicts, customer="acme", run_id=RUN)
    reports = write_all(fleet, stage)
    signed, messages = attest.sign_nodes(ctx, fleet, stage, reports, key)
    return ctx, stage, fleet, signed, messages


@pytest.fixture
def key(tmp_path: Path) -> tuple[Ed25519PrivateKey, Path]:
    private = Ed25519PrivateKey.generate()
    pub = tmp_path / "evidence.pub"
    pub.write_bytes(private.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, pub


def test_ctrf_report_beside_junit_is_valid_and_counts_the_gates(tmp_path):
    _, stage, fleet, _, _ = _certify_dir(tmp_path, None)
    doc = json.loads((stage / "ctrf.json").read_text())
    jsonschema.validate(doc, CTRF_REQUIRED)
    summary, tests = doc["results"]["summary"], doc["results"]["tests"]
    assert summary["tests"] == len(tests) == sum(len({r.gate for r in v.gates}) for v in fleet.nodes.values())
    failed = [t["name"] for t in tests if t["status"] == "failed"]
    assert failed == ["gpu02 h2d_bandwidth"] and summary["failed"] == 1
    assert summary["skipped"] == sum(t["status"] == "skipped" for t in tests) > 0
    assert (stage / "junit.xml").exists()


def test_each_node_gets_a_signed_statement_naming_its_machine(tmp_path, key):
    private, pub = key
    _, _, _, signed, messages = _certify_dir(tmp_path, private)
    assert messages == []
    path, digest = signed["gpu01"]
    assert path is not None and path.endswith("evidence/gpu01/statement.dsse.json")
    env = json.loads(Path(path).read_text())
    stmt = json.loads(base64.b64decode(env["payload"]))
    assert stmt["_type"] == "https://in-toto.io/Statement/v1" and env["payloadType"] == "application/vnd.in-toto+json"
    (subject,) = stmt["subject"]
    assert subject["name"] == "machine:gpu01" and subject["digest"]["sha256"] == digest
    assert [g["uuid"] for g in subject["annotations"]["gpus"]] == ["GPU-gpu01-0", "GPU-gpu01-1"]
    assert subject["annotations"]["driver_version"] and subject["annotations"]["gpus"][0]["vbios"]
    names = {r["name"] for r in stmt["predicate"]["reports"]}
    assert {"nodes/gpu01/certification.json", "probes/gpu01/probe.json", "junit.xml", "ctrf.json"} <= names
    assert stmt["predicate"]["certified"] is True and stmt["predicate"]["gates"]
    assert "PRIVATE" not in Path(path).read_text()
    got, problems = evidence.verify(Path(path), evidence.load_public_key(pub, "--key"), node="gpu01")
    assert problems == [] and got is not None


def test_one_changed_byte_fails_verification(tmp_path, key):
    private, pub = key
    _, stage, _, signed, _ = _certify_dir(tmp_path, private)
    public = evidence.load_public_key(pub, "--key")
    envelope = Path(signed["gpu01"][0] or "")
    report = stage / "nodes" / "gpu01" / "certification.json"
    original = report.read_bytes()
    report.write_bytes(original.replace(b'"certified": true', b'"certified": True', 1)
                       if b'"certified": true' in original else original[:-2] + b" \n")
    _, problems = evidence.verify(envelope, public)
    assert len(problems) == 1 and "certification.json: sha256" in problems[0]
    report.write_bytes(original)
    raw = bytearray(envelope.read_bytes())
    i = raw.index(b'"payload": "') + 20
    raw[i] = ord("A") if raw[i] != ord("A") else ord("B")
    envelope.write_bytes(bytes(raw))
    _, problems = evidence.verify(envelope, public)
    assert problems and "no valid signature" in problems[0]


def test_evidence_of_another_machine_or_key_fails(tmp_path, key):
    private, pub = key
    _, stage, _, signed, _ = _certify_dir(tmp_path, private)
    public = evidence.load_public_key(pub, "--key")
    envelope = Path(signed["gpu01"][0] or "")
    other = evidence.machine_identity(json.loads((stage / "probes" / "gpu02" / "probe.json").read_text()))
    _, problems = evidence.verify(envelope, public, identity=other)
    assert problems and "names another machine" in problems[0] and "GPU-gpu02-0" in problems[0]
    _, problems = evidence.verify(envelope, public, node="gpu02")
    assert problems == [f"{envelope}: subject: 'machine:gpu01' is not machine:gpu02"]
    _, problems = evidence.verify(envelope, Ed25519PrivateKey.generate().public_key())
    assert problems and "no valid signature" in problems[0]


def test_without_a_key_the_statement_is_unsigned_and_said_so(tmp_path):
    _, stage, _, signed, messages = _certify_dir(tmp_path, None)
    assert signed["gpu01"][0] is None and signed["gpu01"][1]
    assert (stage / "evidence" / "gpu01" / "statement.json").exists()
    assert messages and evidence.KEY_ENV in messages[0]


@pytest.mark.parametrize("content", [b"not a key", None])
def test_a_bad_signing_key_is_exit_2_naming_the_variable(tmp_path, content):
    path = tmp_path / "k.pem"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InvalidInput) as err:
        evidence.load_private_key({evidence.KEY_ENV: str(path)})
    assert err.value.code == 2 and str(err.value).startswith(f"{evidence.KEY_ENV}: (environment): ")
    assert str(tmp_path) not in str(err.value)


def test_invoke_evidence_verify_reads_the_ledger(make_inv, tmp_path, key, monkeypatch):
    """The bundle the ledger points to verifies for its node; another node's bundle, or a changed byte, does not."""
    private, pub = key
    inv = make_inv(2)
    root = inv.path.parent.parent / "artifacts"
    ctx, stage, fleet, signed, _ = _certify_dir(tmp_path, private, nodes=("gpu01", "gpu02"))
    ctx = RunContext(customer=inv.customer, run_id=RUN, root=root)
    target = ctx.stage_dir("certify")
    for child in stage.iterdir():
        child.rename(target / child.name)
    moved = {n: (p.replace(str(stage), str(target)) if p else None, d) for n, (p, d) in signed.items()}
    certify_stage.write_summary(inv, ctx, fleet, evidence=moved)
    _, book = ledger.read(root, inv.customer)
    assert book.nodes["gpu01"].evidence == moved["gpu01"][0] and book.nodes["gpu01"].identity == moved["gpu01"][1]
    ok = attest.verify(inv, ctx, bundle=None, node="gpu01", key=str(pub), machine=None)
    assert ok["valid"] and ok["exit_code"] == 0 and ok["subject"] == "machine:gpu01"
    swapped = attest.verify(inv, ctx, bundle=moved["gpu02"][0], node="gpu01", key=str(pub), machine=None)
    assert not swapped["valid"] and swapped["exit_code"] == 5
    assert any("names another machine" in p or "is not machine:gpu01" in p for p in swapped["problems"])
    fresh = str(target / "probes" / "gpu02" / "probe.json")
    other = attest.verify(inv, ctx, bundle=None, node="gpu01", key=str(pub), machine=fresh)
    assert not other["valid"] and "names another machine" in other["problems"][0]
    with pytest.raises(InvalidInput) as err:
        attest.verify(inv, ctx, bundle=None, node="nosuch", key=str(pub), machine=None)
    assert err.value.code == 2 and str(err.value).startswith("--node: (flag): 'nosuch'")
    monkeypatch.delenv(evidence.KEY_ENV, raising=False)
    monkeypatch.delenv(evidence.PUBKEY_ENV, raising=False)
    with pytest.raises(InvalidInput, match="no public key"):
        attest.verify(inv, ctx, bundle=None, node="gpu01", key=None, machine=None)
