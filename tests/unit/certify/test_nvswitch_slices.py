"""2 or 4 GPUs of an 8-GPU NVSwitch board (platform `slice`: a Slurm allocation; or a VM partition) keep each
GPU's NVLink bandwidth into the switch: their collective floors, alltoall included, come from the board, never from
the 4-GPU boards without NVSwitch (issue 30, item 4)."""

from __future__ import annotations

import pytest

from gridready import catalog
from gridready.certify.expectations import Expectations
from gridready.certify.nccl import _expected
from gridready.spec.certification import CertificationSpec
from gridready.spec.cluster import NodeGroup


def _exp(gpus: int, platform: str, collective: str) -> Expectations:
    spec = CertificationSpec.model_validate({"nccl": {"collectives": [collective]}})
    return Expectations(node="n", sku=catalog.lookup("h200"), gpus=gpus, spec=spec,  # type: ignore[arg-type]
                        platform=platform)


@pytest.mark.parametrize("gpus", [2, 4])
@pytest.mark.parametrize("platform", ["slice", "passthrough"])
def test_alltoall_on_a_slice_takes_the_boards_floor(gpus: int, platform: str) -> None:
    got = _expected(_exp(gpus, platform, "alltoall"), "alltoall")
    assert got is not None and got.floor == 288.0  # 90% of 320 GB/s, 8 x NVLink4 (GTC25 S72583)
    assert "NVSwitch board" in (got.source or "")


def test_four_gpu_board_without_nvswitch_derives_its_alltoall_floor() -> None:
    got = _expected(_exp(4, "baremetal", "alltoall"), "alltoall")
    assert got is not None and got.floor == 288 and "derived from the board" in (got.source or "")


@pytest.mark.parametrize("collective", ["all_gather", "reduce_scatter", "sendrecv"])
def test_four_gpu_slice_takes_the_lowest_published_count(collective: str) -> None:
    sku = catalog.lookup("h200")
    assert sku is not None
    got = sku.nccl_floor(4, "ring", collective, nvswitch=True)
    lowest = min(f.floor_gbps for f in sku.nccl_floors if f.collective == collective)
    assert got is not None and got.floor_gbps == lowest and got.gpus == 4


def test_nvls_all_reduce_on_a_slice_has_no_eight_gpu_floor() -> None:
    sku = catalog.lookup("h200")
    assert sku is not None and sku.nccl_floor(4, "nvls", "all_reduce", nvswitch=True) is None
    assert sku.nccl_floor(2, "ring", "all_reduce", nvswitch=True).reference_gbps == 347.0  # type: ignore[union-attr]


def test_slice_is_a_node_group_shape_with_nvswitch() -> None:
    g = NodeGroup(name="slurm", sku="h200", gpus_per_node=4, platform="slice")
    assert g.catalog_sku.shape(4, "slice").nvswitch  # type: ignore[union-attr]
    with pytest.raises(ValueError):
        NodeGroup(name="slurm", sku="h100-nvl", gpus_per_node=4, platform="slice")
