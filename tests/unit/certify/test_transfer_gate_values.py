"""Host<->device and peer copy gates: the real 2x H200 torch figures against the catalog floors, nvbandwidth when
torch is absent, and the exact verdict sentences (which pair or GPU, which figure, which floor)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gridready.certify import transfer
from gridready.certify.result import GateStatus as S
from gridready.probe.offline import doc_from_outputs
from tests.unit.certify.fixtures_io import probe_quick, pub
from tests.unit.certify.test_gates_public import exp

H200 = exp("h200", 2, "passthrough")
NO_TORCH = ("PyTorch not importable on the node (not collected); provision installs it (software.probe_torch, role "
            "gridready_probe_runtime)")


def _doc() -> dict[str, Any]:
    return copy.deepcopy(probe_quick())


def _no_torch(doc: dict[str, Any]) -> dict[str, Any]:
    doc.pop("torch")
    return doc


# ---- h2d_bandwidth ----------------------------------------------------------------------------------------------

def test_h2d_healthy_capture_passes_each_gpu() -> None:
    res = transfer.h2d_bandwidth(_doc(), H200)
    assert [(r.gpu, r.status, r.reason) for r in res] == [
        (0, S.PASS, "GPU 0: host->device 55.4, device->host 55.3 GB/s"),
        (1, S.PASS, "GPU 1: host->device 55.4, device->host 55.3 GB/s")]
    r = res[1]
    assert r.gate == "h2d_bandwidth" and r.unit == "GB/s" and r.evidence == "torch.gpus[1]"
    assert r.measured == {"h2d": pytest.approx(55.383, abs=1e-3), "d2h": pytest.approx(55.280, abs=1e-3)}
    assert r.expected.floor == 48.0


@pytest.mark.parametrize(("h2d", "d2h", "status"), [(48.0, 48.0, S.PASS), (47.9, 55.0, S.FAIL),
                                                    (55.0, 47.9, S.FAIL)])
def test_h2d_floor_applies_to_the_slower_direction(h2d: float, d2h: float, status: S) -> None:
    doc = _doc()
    doc["torch"]["gpus"][0].update(h2d_gbps=h2d, d2h_gbps=d2h)
    r = transfer.h2d_bandwidth(doc, H200)[0]
    assert r.status is status
    if status is S.FAIL:
        assert r.reason == (f"GPU 0: host->device {h2d:.1f} / device->host {d2h:.1f} GB/s below 48 GB/s (PCIe link or "
                            "NUMA placement)")


@pytest.mark.parametrize("missing", ["h2d_gbps", "d2h_gbps"])
def test_h2d_missing_direction_is_an_error(missing: str) -> None:
    doc = _doc()
    doc["torch"]["gpus"][1].pop(missing)
    r = transfer.h2d_bandwidth(doc, H200)[1]
    assert r.status is S.ERROR and r.reason == "GPU 1: no host<->device measurement"


def test_h2d_without_torch_or_nvbandwidth_is_one_error() -> None:
    (r,) = transfer.h2d_bandwidth(_no_torch(_doc()), H200)
    assert r.status is S.ERROR and r.reason == f"{NO_TORCH}; nvbandwidth not run either"
    assert r.expected.floor == 48.0 and r.unit == "GB/s" and r.evidence == "torch" and r.gpu is None


def test_h2d_from_nvbandwidth_when_torch_is_absent() -> None:
    doc = doc_from_outputs({"nvbandwidth": pub("nvbandwidth", "GH200")})
    (r,) = transfer.h2d_bandwidth(doc, exp("h100", 1))[:1]
    assert r.status is S.PASS and r.evidence == "raw.nvbandwidth[0]"
    assert r.reason == "GPU 0: host->device 369.4, device->host 295.1 GB/s"
    doc["nvbandwidth"]["present"] = False
    (err,) = transfer.h2d_bandwidth(doc, exp("h100", 1))
    assert err.status is S.ERROR


# ---- peer_bandwidth ---------------------------------------------------------------------------------------------

def test_peer_healthy_capture_passes() -> None:
    (r,) = transfer.peer_bandwidth(_doc(), H200)
    assert r.status is S.PASS and r.reason == "2 GPU pairs, slowest 392 GB/s"
    assert r.measured == {"0->1": pytest.approx(391.956, abs=1e-3), "1->0": pytest.approx(391.815, abs=1e-3)}
    assert r.expected.floor == 335.0 and r.unit == "GB/s" and r.evidence == "torch.peer" and r.gpu is None


def test_peer_one_gpu_is_not_applicable() -> None:
    (r,) = transfer.peer_bandwidth(_doc(), exp("h200", 1, "passthrough"))
    assert r.status is S.SKIPPED and r.reason == "n/a: one GPU: no peer to copy to"


def test_peer_without_nvlink_is_not_applicable() -> None:
    (r,) = transfer.peer_bandwidth(_doc(), exp("h100-pcie", 1))
    assert r.status is S.SKIPPED
    e = exp("h200", 2, "passthrough")
    no_link = type(e)(node="n1", sku=e.sku.model_copy(update={"nvlink_links": 0}), gpus=2, spec=e.spec,
                      platform="passthrough")
    (r,) = transfer.peer_bandwidth(_doc(), no_link)
    assert r.reason == "n/a: H200-SXM-141GB 2 GPUs passthrough: no NVLink between the GPUs, no peer floor"
    odd = type(e)(node="n1", sku=e.sku.model_copy(update={"nvlink_links": 0}), gpus=3, spec=e.spec,
                  platform="baremetal")  # no catalog shape: the label is left out
    (r,) = transfer.peer_bandwidth(_doc(), odd)
    assert r.reason == "n/a: H200-SXM-141GB: no NVLink between the GPUs, no peer floor"


def test_peer_without_torch_or_nvbandwidth_is_one_error() -> None:
    (r,) = transfer.peer_bandwidth(_no_torch(_doc()), H200)
    assert r.status is S.ERROR and r.reason == f"{NO_TORCH}; nvbandwidth not run either"
    assert r.expected.floor == 335.0 and r.unit == "GB/s" and r.evidence == "torch"


def test_peer_with_no_pairs_measured_is_an_error() -> None:
    doc = _doc()
    doc["torch"]["peer"] = []
    (r,) = transfer.peer_bandwidth(doc, H200)
    assert r.status is S.ERROR and r.reason == "no peer copy measured" and r.unit == "GB/s"


@pytest.mark.parametrize(("pair", "bad"), [
    ({"access": False, "gbps": None}, "GPU 1->0: no peer access"),
    ({"access": True, "gbps": None}, "GPU 1->0: not measured"),
    ({"access": True, "gbps": 334.6}, "GPU 1->0: 335 GB/s"),
])
def test_peer_pair_failing_is_named(pair: dict[str, Any], bad: str) -> None:
    doc = _doc()
    doc["torch"]["peer"][1].update(pair)
    (r,) = transfer.peer_bandwidth(doc, H200)
    assert r.status is S.FAIL and r.reason == f"peer copies below 335 GB/s: {bad}"
    assert r.measured["1->0"] == pair["gbps"]


def test_peer_floor_is_inclusive() -> None:
    doc = _doc()
    doc["torch"]["peer"][0]["gbps"] = 335.0
    (r,) = transfer.peer_bandwidth(doc, H200)
    assert r.status is S.PASS and r.reason == "2 GPU pairs, slowest 335 GB/s"


def _nvbw_peer(matrix: dict[str, dict[str, float | None]]) -> dict[str, Any]:
    """A torch-less document whose nvbandwidth ran the device-to-device write copy (`N/A` cells read as None)."""
    doc = doc_from_outputs({"nvbandwidth": pub("nvbandwidth", "GH200")})
    doc["nvbandwidth"]["tests"]["device_to_device_memcpy_write_ce"] = {"matrix": matrix, "sum": None}
    return doc


def test_peer_from_nvbandwidth_matrix_skips_the_diagonal() -> None:
    doc = _nvbw_peer({"0": {"0": None, "1": 390.5}, "1": {"0": 389.25, "1": None}})
    (r,) = transfer.peer_bandwidth(doc, H200)
    assert r.status is S.PASS and r.reason == "2 GPU pairs, slowest 389 GB/s"
    assert r.measured == {"0->1": 390.5, "1->0": 389.25}
    assert r.evidence == "raw.nvbandwidth.device_to_device_memcpy_write_ce"  # not the absent torch copies


def test_peer_from_nvbandwidth_without_access_fails() -> None:
    doc = _nvbw_peer({"0": {"0": None, "1": None}, "1": {"0": 120.0, "1": None}})
    (r,) = transfer.peer_bandwidth(doc, H200)
    assert r.status is S.FAIL
    assert r.reason == "peer copies below 335 GB/s: GPU 0->1: no peer access; GPU 1->0: 120 GB/s"
    assert r.evidence == "raw.nvbandwidth.device_to_device_memcpy_write_ce"


def test_peer_from_nvbandwidth_without_the_copy_test_is_an_error() -> None:
    doc = doc_from_outputs({"nvbandwidth": pub("nvbandwidth", "GH200")})
    (r,) = transfer.peer_bandwidth(doc, H200)
    assert r.status is S.ERROR and r.reason == "no peer copy measured"


def test_peer_failure_lists_at_most_eight_pairs() -> None:
    doc = _doc()
    doc["torch"]["peer"] = [{"src": s, "dst": d, "access": True, "gbps": 100.0 + 10 * s + d}
                            for s in range(3) for d in range(4) if s != d]
    (r,) = transfer.peer_bandwidth(doc, exp("h200", 4, "passthrough"))
    assert r.status is S.FAIL
    listed = r.reason.removeprefix("peer copies below 335 GB/s: ").split("; ")
    assert listed == ["GPU 0->1: 101 GB/s", "GPU 0->2: 102 GB/s", "GPU 0->3: 103 GB/s", "GPU 1->0: 110 GB/s",
                      "GPU 1->2: 112 GB/s", "GPU 1->3: 113 GB/s", "GPU 2->0: 120 GB/s", "GPU 2->1: 121 GB/s"]
    assert len(r.measured) == 9
