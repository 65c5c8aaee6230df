"""HardwareProfile / Fault: schema, validation, JSON round trip (what the fleet writes to each host)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sandbox.profile import Fault, FaultKind, HardwareProfile, Hca


def test_sample_is_the_default_hgx_h200_host():
    p = HardwareProfile.sample("gpu-1", address="10.77.0.11")
    assert (p.sku, p.gpus, len(p.hcas)) == ("H200-SXM-141GB", 8, 8)
    assert {h.rate_gbps for h in p.hcas} == {400} and p.hcas[0].name == "mlx5_0"
    assert p.healthy and p.facts["device_id"] == "0x2335"


def test_json_round_trip(tmp_path):
    p = HardwareProfile.sample("gpu-2", faults=[Fault(kind="pcie_downtrained", gpu=3), Fault(kind="xid", code=79)])
    assert HardwareProfile.read(p.write(tmp_path / "etc/gridready-sim/profile.json")) == p


def test_sku_is_normalised_from_alias_or_device_id():
    assert HardwareProfile(sku="0x2330").sku == "H100-SXM5-80GB"
    assert HardwareProfile(sku="h200").sku == "H200-SXM-141GB"


@pytest.mark.parametrize(
    "data",
    [
        {"sku": "B200"},  # not in the catalog
        {"gpus": 8, "faults": [{"kind": "xid", "gpu": 8}]},  # GPU out of range
        {"hcas": [], "faults": [{"kind": "hca_down"}]},  # HCA fault without HCAs
        {"faults": [{"kind": "hca_half_rate", "gpu": 1}]},  # HCA fault aimed at a GPU
        {"faults": [{"kind": "thermal_throttle", "factor": 0.5}]},  # factor only for low_nccl_busbw
        {"faults": [{"kind": "bogus"}]},
        {"address": "192.168.1.5"},  # outside the sandbox
        {"extra": 1},  # extra=forbid
    ],
)
def test_invalid_profiles_are_rejected(data):
    with pytest.raises(ValidationError):
        HardwareProfile.model_validate(data)


def test_hca_fault_must_name_a_known_hca():
    with pytest.raises(ValidationError):
        HardwareProfile.sample(faults=[Fault(kind="hca_down", hca="mlx5_9")])
    p = HardwareProfile(hcas=[Hca(name="mlx5_0", netdev="ibp25s0")], faults=[Fault(kind="hca_down", hca="mlx5_0")])
    assert p.faults_of(FaultKind.HCA_DOWN)[0].hca == "mlx5_0"


def test_every_fault_kind_is_documented():
    doc = (__import__("pathlib").Path(__file__).resolve().parents[2] / "docs/simulator.md").read_text()
    for kind in FaultKind:
        assert f"`{kind.value}`" in doc
