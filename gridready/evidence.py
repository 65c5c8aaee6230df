"""Signed, standard evidence of one node's certification: an in-toto Statement v1 in a DSSE envelope (ed25519).

The Statement's subject is the machine, not a file: its name is `machine:<node>` and its digest the sha256 of the
machine's identity (every GPU's UUID, serial, VBIOS and PCI address, the driver and CUDA versions, the RDMA HCAs'
firmware and board ids, the board and product serials from DMI), which the subject's annotations carry in full.
The predicate (`https://gridready.dev/certification/v1`) holds the verdict, every gate result and the sha256 of
each report it rests on (certification.json, the probe, junit.xml, ctrf.json). The envelope is signed with an
ed25519 key the customer holds (`GRIDREADY_EVIDENCE_KEY`: path of a PEM PKCS#8 private key; never copied into an
artifact); `verify` checks a bundle against the public key, the reports beside it and, when given, the identity
of the machine it is claimed for.

Formats: in-toto Statement v1 (https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md) and DSSE
(https://github.com/secure-systems-lab/dsse/blob/master/protocol.md), built here with pydantic and `cryptography`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gridready import safefile
from gridready.errors import InvalidInput
from gridready.yamlio import MAX_ARTIFACT_BYTES, YamlError, read_capped

KEY_ENV = "GRIDREADY_EVIDENCE_KEY"
PUBKEY_ENV = "GRIDREADY_EVIDENCE_PUBKEY"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://gridready.dev/certification/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
ENVELOPE_FILE = "statement.dsse.json"


class ResourceDescriptor(BaseModel):
    """in-toto v1 ResourceDescriptor (the fields gridready uses)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    digest: dict[str, str]
    annotations: dict[str, Any] | None = None


class Statement(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type_: Literal["https://in-toto.io/Statement/v1"] = Field(STATEMENT_TYPE, alias="_type")
    subject: list[ResourceDescriptor]
    predicateType: str = PREDICATE_TYPE  # noqa: N815 (the in-toto field name)
    predicate: dict[str, Any]


class Signature(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keyid: str
    sig: str


class Envelope(BaseModel):
    model_config = ConfigDict(extra="forbid")

    payloadType: Literal["application/vnd.in-toto+json"] = PAYLOAD_TYPE  # noqa: N815 (the DSSE field name)
    payload: str
    signatures: list[Signature]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def machine_identity(doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """What names this machine in a probe document: GPUs (uuid, serial, vbios, bus id, name) in bus order, driver
    and CUDA versions, HCAs (firmware, board id) and DMI serials. Measurements never enter it."""
    doc = doc or {}
    smi = doc.get("nvidia_smi") or {}
    q = smi.get("q") or {}
    gpus = [{"uuid": g.get("uuid"), "serial": g.get("serial"), "vbios": g.get("vbios"),
             "bus_id": g.get("bus_id"), "name": g.get("name")} for g in q.get("gpus") or []]
    if not gpus:  # the -q parse failed: the CSV query holds the same keys
        gpus = [{"uuid": r.get("uuid"), "serial": r.get("serial"), "vbios": r.get("vbios_version"),
                 "bus_id": r.get("pci.bus_id"), "name": r.get("name")} for r in smi.get("query") or []]
    gpus.sort(key=lambda g: str(g.get("bus_id")))
    devices = (doc.get("hca") or {}).get("sysfs") or {}
    hcas = {name: {"fw_ver": d.get("fw_ver"), "board_id": d.get("board_id")}
            for name, d in sorted(devices.items()) if isinstance(d, dict) and ("fw_ver" in d or "board_id" in d)}
    dmi = ((doc.get("system") or {}).get("dmi") or {})
    return {"gpus": gpus, "driver_version": q.get("driver_version"), "cuda_version": q.get("cuda_version"),
            "hcas": hcas, "dmi": {k: v for k, v in sorted(dmi.items()) if k != "product_name" or v}}


def identity_digest(identity: Mapping[str, Any]) -> str:
    return sha256(canonical(identity))


def statement(node: str, identity: Mapping[str, Any], verdict: Mapping[str, Any], reports: Mapping[str, Path],
              base: Path, *, customer: str | None, run_id: str | None) -> Statement:
    """The Statement for one node: subject = the machine, predicate = verdict, gates and report digests (paths
    relative to `base`, the certify stage folder)."""
    return Statement(
        subject=[ResourceDescriptor(name=f"machine:{node}", digest={"sha256": identity_digest(identity)},
                                    annotations=dict(identity))],
        predicate={
            "node": node, "customer": customer, "run_id": run_id, "profile": verdict.get("profile"),
            "certified": verdict.get("certified"), "judged_at": verdict.get("judged_at"),
            "valid_until": verdict.get("valid_until"), "blocking": verdict.get("blocking", []),
            "simulated": bool(verdict.get("simulated")),
            "gates": [{k: g.get(k) for k in ("gate", "gpu", "hca", "status", "waived", "reason")}
                      for g in verdict.get("gates", [])],
            "reports": [ResourceDescriptor(name=str(p.relative_to(base)), digest={
                "sha256": sha256(safefile.read_bytes(p, MAX_ARTIFACT_BYTES, base, follow_inside=False))})
                        .model_dump(exclude_none=True) for _, p in sorted(reports.items())],
        })


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what the signature covers."""
    t = payload_type.encode()
    return b"DSSEv1 %d %b %d %b" % (len(t), t, len(body), body)


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "ed25519:" + sha256(raw)[:32]


def sign(stmt: Statement, key: Ed25519PrivateKey) -> Envelope:
    body = stmt.model_dump_json(by_alias=True, exclude_none=True).encode()
    sig = key.sign(pae(PAYLOAD_TYPE, body))
    return Envelope(payload=base64.b64encode(body).decode(),
                    signatures=[Signature(keyid=key_id(key.public_key()), sig=base64.b64encode(sig).decode())])


def load_private_key(env: Mapping[str, str] | None = None) -> Ed25519PrivateKey | None:
    """The signing key named by GRIDREADY_EVIDENCE_KEY; None when unset; InvalidInput (exit 2) when unreadable or
    not an unencrypted ed25519 PEM key. Its bytes never leave this process."""
    env = os.environ if env is None else env
    where = env.get(KEY_ENV)
    if not where:
        return None
    try:
        key = serialization.load_pem_private_key(read_capped(Path(where)), password=None)
    except YamlError as err:
        raise InvalidInput(f"{KEY_ENV}: (environment): the path it names: {err}") from None
    except (ValueError, TypeError) as err:
        raise InvalidInput(f"{KEY_ENV}: (environment): cannot read an unencrypted PEM private key at the path it "
                           f"names ({type(err).__name__})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InvalidInput(f"{KEY_ENV}: (environment): the key is not ed25519")
    return key


def load_public_key(path: Path, source: str) -> Ed25519PublicKey:
    """An ed25519 public key (PEM SubjectPublicKeyInfo, or the private key's PEM: its public half)."""
    try:  # a regular file of bounded size, never a FIFO that would block
        data = read_capped(path)
    except YamlError as err:
        raise InvalidInput(f"{source}: {path}: {err}") from None
    try:
        key: Any = serialization.load_pem_public_key(data)
    except ValueError:
        try:
            key = serialization.load_pem_private_key(data, password=None).public_key()
        except (ValueError, TypeError):
            raise InvalidInput(f"{source}: {path}: not a PEM ed25519 key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidInput(f"{source}: {path}: the key is not ed25519")
    return key


def write_bundle(out_dir: Path, envelope: Envelope | None, stmt: Statement) -> Path:
    """evidence/<node>/statement.dsse.json when signed, else statement.json (unsigned, for people)."""
    from gridready.artifacts import write_atomic

    if envelope is None:
        return write_atomic(out_dir / "statement.json", stmt.model_dump_json(by_alias=True, indent=2) + "\n")
    return write_atomic(out_dir / ENVELOPE_FILE, envelope.model_dump_json(indent=2) + "\n")


def verify(envelope_path: Path, public: Ed25519PublicKey, *, base: Path | None = None,
           identity: Mapping[str, Any] | None = None, node: str | None = None) -> tuple[Statement | None, list[str]]:
    """Check a bundle: the envelope's signature under `public`, the Statement's shape, every report's digest
    (files under `base`, default the certify folder two levels above the envelope) and, when given, that the
    subject is `node` and the machine `identity`. Returns the statement and one line per problem ([] = valid)."""
    try:
        env = Envelope.model_validate_json(read_capped(envelope_path, MAX_ARTIFACT_BYTES))
    except YamlError as err:
        return None, [f"{envelope_path}: {err}"]
    except ValidationError as err:
        first = err.errors()[0]
        return None, [f"{envelope_path}: {'.'.join(map(str, first['loc'])) or '(file)'}: {first['msg']}"]
    try:
        body = base64.b64decode(env.payload, validate=True)
    except ValueError:
        return None, [f"{envelope_path}: payload: not base64"]
    want = key_id(public)
    good = False
    for s in env.signatures:
        try:
            public.verify(base64.b64decode(s.sig), pae(env.payloadType, body))
            good = True
        except (InvalidSignature, ValueError):
            continue
    if not good:
        names = ", ".join(s.keyid for s in env.signatures) or "none"
        return None, [f"{envelope_path}: signatures: no valid signature by {want} (signed by {names})"]
    try:
        stmt = Statement.model_validate_json(body)
    except ValidationError as err:
        return None, [f"{envelope_path}: payload: not an in-toto Statement v1 ({err.errors()[0]['msg']})"]
    problems = []
    if stmt.predicateType != PREDICATE_TYPE:
        problems.append(f"{envelope_path}: predicateType: {stmt.predicateType!r} is not {PREDICATE_TYPE!r}")
    base = base or envelope_path.parent.parent.parent
    for r in stmt.predicate.get("reports", []):
        path = base / r["name"]
        try:  # a name from the bundle under verification: read beneath its run folder, never `..` or a link out
            got = sha256(safefile.read_bytes(path, MAX_ARTIFACT_BYTES, base, follow_inside=False))
        except safefile.UnsafeFile as err:
            problems.append(f"{path}: missing (the statement names it)" if err.missing else f"{path}: {err}")
            continue
        if got != r["digest"]["sha256"]:
            problems.append(f"{path}: sha256 {got[:16]}... differs from the signed {r['digest']['sha256'][:16]}...")
    subject = stmt.subject[0] if stmt.subject else None
    if subject is None:
        problems.append(f"{envelope_path}: subject: empty")
    else:
        if node is not None and subject.name != f"machine:{node}":
            problems.append(f"{envelope_path}: subject: {subject.name!r} is not machine:{node}")
        if subject.annotations is not None and identity_digest(subject.annotations) != subject.digest.get("sha256"):
            problems.append(f"{envelope_path}: subject: annotations do not match the subject's digest")
        if identity is not None and identity_digest(identity) != subject.digest.get("sha256"):
            problems.append(f"{envelope_path}: subject: names another machine than the one given "
                            f"({_difference(subject.annotations or {}, identity)})")
    return stmt, problems


def _difference(signed: Mapping[str, Any], actual: Mapping[str, Any]) -> str:
    signed_gpus = {g.get("uuid") for g in signed.get("gpus", [])}
    actual_gpus = {g.get("uuid") for g in actual.get("gpus", [])}
    if signed_gpus != actual_gpus:  # GPUs added, GPUs gone (a GPU fallen off the bus), or both
        added, gone = sorted(map(str, actual_gpus - signed_gpus)), sorted(map(str, signed_gpus - actual_gpus))
        return "; ".join([*([f"GPU UUIDs {added} not in the signed machine"] if added else []),
                          *([f"signed GPU UUIDs {gone} not in this machine"] if gone else [])])
    keys = [k for k in sorted(set(signed) | set(actual)) if signed.get(k) != actual.get(k)]
    return "differs in " + ", ".join(keys) if keys else "identity differs"
