"""The catalog's per-collective busbw floors on NVLink4 HGX (H100 SXM and H200 SXM): each published 8-GPU figure
gives its floor at 90%, the point-to-point collectives (alltoall, sendrecv) take theirs whatever `nccl.algo` says,
and a GPU count without a published alltoall figure has no floor (the gate then asks the spec for one)."""

from __future__ import annotations

import pytest

from gridready import catalog

EIGHT = {"all_gather": 361.4, "reduce_scatter": 362.9, "alltoall": 320.0, "sendrecv": 370.0}


@pytest.mark.parametrize("sku", ["H100-SXM5-80GB", "H200-SXM-141GB"])
@pytest.mark.parametrize("algo", ["ring", "nvls"])
@pytest.mark.parametrize(("collective", "reference"), EIGHT.items())
def test_eight_gpu_floors_are_90_percent_of_a_published_figure(sku: str, algo: str, collective: str,
                                                               reference: float) -> None:
    found = catalog.lookup(sku)
    assert found is not None
    floor = found.nccl_floor(8, algo, collective)
    assert floor is not None and floor.gpus == 8 and floor.collective == collective
    assert floor.reference_gbps == reference and floor.floor_gbps == round(0.9 * reference)
    assert floor.source  # every published figure names where it was published


@pytest.mark.parametrize("gpus", [2, 4])
@pytest.mark.parametrize("algo", ["ring", "nvls"])
def test_alltoall_below_eight_gpus_has_no_floor(gpus: int, algo: str) -> None:
    assert catalog.lookup("h200").nccl_floor(gpus, algo, "alltoall") is None  # type: ignore[union-attr]


def test_sendrecv_floor_is_the_same_for_either_algorithm_and_ring_collectives_are_not() -> None:
    sku = catalog.lookup("h200")
    assert sku is not None
    assert sku.nccl_floor(2, "nvls", "sendrecv") == sku.nccl_floor(2, "ring", "sendrecv")
    assert sku.nccl_floor(2, "nvls", "sendrecv").reference_gbps == 366.0  # type: ignore[union-attr]
    assert sku.nccl_floor(2, "nvls", "all_gather") is None  # measured with NVLS off only
    assert sku.nccl_floor(8, "nvls", "all_reduce").floor_gbps == 460.0  # type: ignore[union-attr]


def test_a_four_gpu_node_takes_the_nearest_smaller_published_count() -> None:
    sku = catalog.lookup("h100")
    assert sku is not None
    assert sku.nccl_floor(4, "ring", "all_gather").gpus == 2  # type: ignore[union-attr]
    assert sku.nccl_floor(4, "ring", "sendrecv").gpus == 2  # type: ignore[union-attr]


def test_pcie_skus_have_no_collective_floor_beyond_all_reduce() -> None:
    for name in ("H100-NVL-94GB", "H100-PCIe-80GB"):
        sku = catalog.lookup(name)
        assert sku is not None
        assert {f.collective for f in sku.nccl_floors} == {"all_reduce"}
