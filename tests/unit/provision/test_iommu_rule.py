"""Issue 45, finding 5: provision and certification share one IOMMU rule (gridready.spec.iommu). The kernel
argument provision adds, booted, is what the iommu gate passes, for every node group: an Ethernet-only group got no
iommu=pt and was then quarantined by the gate for a translating IOMMU."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gridready import catalog, inventory
from gridready.certify import host_settings
from gridready.certify.expectations import Expectations
from gridready.certify.result import GateStatus
from gridready.probe.offline import doc_from_outputs
from gridready.provision_vars import role_vars
from gridready.spec import iommu
from gridready.spec.certification import CertificationSpec
from gridready.spec.cluster import Nic

REPO = Path(__file__).resolve().parents[3]
ETHERNET = [Nic(name="eth0", kind="ethernet", rate_gbps=100, netdev="ens1f0np0")]
ROCE = [Nic(name="mlx5_0", kind="roce", rate_gbps=400, rail=0, netdev="ens2f0np0")]


def _booted(passthrough: bool) -> str:
    """The kernel command line of a host that booted what provision wrote (host_tuning's GRUB drop-in)."""
    args = yaml.safe_load((REPO / "roles/gridready_host_tuning/vars/main.yml").read_text())
    return " ".join(["BOOT_IMAGE=/vmlinuz", "ro", "quiet", *(args["__gridready_host_tuning_iommu_args"]
                                                                if passthrough else [])])


def _gate(cmdline: str, want: str, gdr: bool) -> GateStatus:
    exp = Expectations(node="n1", sku=catalog.lookup("h200"), gpus=8,  # type: ignore[arg-type]
                       spec=CertificationSpec(host={"iommu": want}), gpudirect_rdma=gdr)
    (r,) = host_settings.iommu(doc_from_outputs({}, cmdline=cmdline, iommu_groups=120), exp)
    return r.status


@pytest.mark.parametrize("want", ["off_or_passthrough", "any"])
@pytest.mark.parametrize(("nics", "gdr"), [([], False), (ETHERNET, False), (ETHERNET, True), (ROCE, False),
                                           (ROCE, True)])
def test_what_provision_boots_the_iommu_gate_passes(want: str, nics: list[Nic], gdr: bool) -> None:
    """On a host whose IOMMU translates by default (VT-d on, 120 groups): provision's decision, booted, passes."""
    inv = inventory.load(REPO / "inventories" / "acme-h200")
    inv.spec.certification.host.iommu = want  # type: ignore[assignment]
    group = inv.spec.node_groups[0].model_copy(update={"nics": nics, "gpudirect_rdma": gdr})
    passthrough = role_vars(inv.spec, group)["gridready_host_tuning_iommu_passthrough"]
    assert _gate(_booted(passthrough), want, gdr) is GateStatus.PASS


def test_an_ethernet_only_group_gets_iommu_passthrough() -> None:
    inv = inventory.load(REPO / "inventories" / "acme-h200")
    group = inv.spec.node_groups[0].model_copy(update={"nics": ETHERNET})
    assert role_vars(inv.spec, group)["gridready_host_tuning_iommu_passthrough"] is True


def test_gpudirect_rdma_gets_passthrough_even_where_the_gate_only_records() -> None:
    assert iommu.passthrough_wanted("any", gpudirect_rdma=True)
    assert not iommu.passthrough_wanted("any", gpudirect_rdma=False)


def test_the_role_adds_the_rules_arguments() -> None:
    args = yaml.safe_load((REPO / "roles/gridready_host_tuning/vars/main.yml").read_text())
    assert tuple(args["__gridready_host_tuning_iommu_args"]) == iommu.PASSTHROUGH_ARGS


@pytest.mark.parametrize(("mode", "want", "ok"), [
    ("translated", "off_or_passthrough", False), ("passthrough", "off_or_passthrough", True),
    ("off", "off_or_passthrough", True), ("translated", "any", True),
])
def test_the_gate_rule(mode: str, want: str, ok: bool) -> None:
    assert iommu.accepted(mode, want) is ok  # type: ignore[arg-type]
