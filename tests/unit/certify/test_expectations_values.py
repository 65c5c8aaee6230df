"""What a node is expected to show: SKU resolution from each kind of target, floors (spec over catalog, pair share
on direct-connect boards) and the skipped / error results for shapes the catalog does not sell."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gridready import catalog
from gridready.certify.expectations import Expectations, from_target
from gridready.certify.result import Expected, GateResult
from gridready.certify.result import GateStatus as S
from gridready.spec.certification import CertificationSpec
from tests.unit.certify.fixtures_io import group

SPEC = CertificationSpec(profile="quick")
H200 = catalog.lookup("h200")


@pytest.mark.parametrize("target", [H200, "h200", "0x2335", "H200-SXM-141GB"])
def test_a_sku_or_key_means_eight_gpus_bare_metal_with_gdr(target: object) -> None:
    e = from_target("n1", SPEC, target, driver_branch="580", rdma_stack="doca")
    assert e == Expectations(node="n1", sku=H200, gpus=8, spec=SPEC, driver_branch="580",  # type: ignore[arg-type]
                             gpudirect_rdma=True, rdma_stack="doca", nics=(), platform="baremetal")


def test_an_unknown_key_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^unknown SKU 'z9000'$"):
        from_target("n1", SPEC, "z9000")


def test_a_node_group_gives_its_count_nics_gdr_and_platform() -> None:
    g = group(gpus=2, gdr=False)
    g = g.model_copy(update={"nics": [SimpleNamespace(name="mlx5_0"), SimpleNamespace(name="mlx5_3")]})
    e = from_target("n2", SPEC, g)
    assert (e.sku, e.gpus, e.nics, e.gpudirect_rdma, e.platform) == (H200, 2, ("mlx5_0", "mlx5_3"), False,
                                                                    "passthrough")
    assert (e.driver_branch, e.rdma_stack) == (None, None)


def test_a_bare_target_with_only_sku_and_count_takes_the_defaults() -> None:
    e = from_target("n3", SPEC, SimpleNamespace(sku="0x2335", gpus_per_node="4"))
    assert (e.sku, e.gpus, e.nics, e.gpudirect_rdma, e.platform) == (H200, 4, (), True, "baremetal")


def test_a_target_catalog_sku_wins_over_its_sku_text() -> None:
    h100 = catalog.lookup("h100")
    e = from_target("n", SPEC, SimpleNamespace(catalog_sku=h100, sku="h200", gpus_per_node=8, nics=None))
    assert e.sku is h100 and e.nics == ()


def test_a_target_with_an_unknown_sku_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^unknown SKU 'z9000'$"):
        from_target("n", SPEC, SimpleNamespace(sku="z9000", gpus_per_node=8))


@pytest.mark.parametrize(("name", "floor", "source"), [
    ("bf16_gemm_tflops", H200.bf16_gemm_floor_tflops, "catalog: H200-SXM-141GB"),
    ("fp8_gemm_tflops", H200.fp8_gemm_floor_tflops, "catalog: H200-SXM-141GB"),
    ("hbm_copy_tbps", H200.hbm_copy_floor_tbps, "catalog: H200-SXM-141GB"),
    ("h2d_gbps", H200.h2d_floor_gbps, "catalog: H200-SXM-141GB"),
    ("peer_gbps", H200.peer_floor_gbps, "catalog: H200-SXM-141GB"),  # 8 GPUs on NVSwitch: the full floor
])
def test_catalog_floors_on_an_nvswitch_board(name: str, floor: float, source: str) -> None:
    e = from_target("n", SPEC, "h200")
    assert e.floor(name) == Expected(floor=floor, source=source)


def test_a_spec_floor_overrides_the_catalog() -> None:
    spec = CertificationSpec(profile="quick", floors={"bf16_gemm_tflops": 500.0, "peer_gbps": 100.0})
    e = from_target("n", spec, group(gpus=4, platform="baremetal"))
    assert e.floor("bf16_gemm_tflops") == Expected(floor=500.0, source="spec")
    assert e.floor("peer_gbps") == Expected(floor=100.0, source="spec")
    assert e.floor("hbm_copy_tbps") == Expected(floor=H200.hbm_copy_floor_tbps, source="catalog: H200-SXM-141GB")


def test_a_direct_connect_pair_gets_its_share_of_the_links() -> None:
    e = from_target("n", SPEC, group(gpus=4, platform="baremetal"))  # HGX H200 4-GPU: 6 of 18 NVLinks per pair
    assert e.floor("peer_gbps") == Expected(
        floor=round(335.0 * 6 / 18, 1),
        source="catalog: H200-SXM-141GB 4 GPUs baremetal, 335 GB/s x 6/18 NVLinks per GPU pair")
    assert e.floor("peer_gbps").floor == 111.7
    assert e.floor("h2d_gbps") == Expected(floor=H200.h2d_floor_gbps, source="catalog: H200-SXM-141GB")


def test_an_unknown_shape_has_no_pair_share() -> None:
    e = Expectations(node="n", sku=H200, gpus=3, spec=SPEC)  # type: ignore[arg-type]
    assert e.shape is None
    assert e.floor("peer_gbps") == Expected(floor=335.0, source="catalog: H200-SXM-141GB")


def test_shape_error_names_the_shape_and_what_the_catalog_sells() -> None:
    e = Expectations(node="n9", sku=H200, gpus=3, spec=SPEC, platform="passthrough")  # type: ignore[arg-type]
    assert e.shape_error("peer_bandwidth") == GateResult(
        gate="peer_bandwidth", node="n9", status=S.ERROR,
        reason=f"3 x H200-SXM-141GB passthrough is not a shape the catalog knows ({H200.shape_names()}): what this "
               "gate expects is unknown")


def test_not_applicable_is_skipped_and_not_required() -> None:
    e = from_target("n4", SPEC, "h200")
    assert e.not_applicable("nvlink", "one GPU has no peer") == GateResult(
        gate="nvlink", node="n4", status=S.SKIPPED, reason="n/a: one GPU has no peer", required=False)
