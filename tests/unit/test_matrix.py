"""gridready.matrix (the version matrix) and gridready.provision_vars (spec -> role variables)."""

from __future__ import annotations

import hashlib
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml

from gridready import cli, inventory, matrix
from gridready.errors import InvalidInput
from gridready.provision_vars import role_vars
from gridready.spec import ClusterSpec, Nic, NodeGroup, SoftwarePins
from tests.sandbox_sim.aptroot import role_vars as aptroot_role_vars

REPO = Path(__file__).resolve().parents[2]


def _spec(**software) -> ClusterSpec:
    return ClusterSpec(customer="acme", node_groups=[NodeGroup(name="gpu_nodes", sku="h200", os="ubuntu-22.04")],
                       software=SoftwarePins(**software))


def test_matrix_loads_and_every_row_has_known_sources():
    m = matrix.load()
    assert "580" in m.driver_branches and "13.0" in m.cuda
    assert m.dcgm_package("13.0", 4) == "datacenter-gpu-manager-4-cuda13"


def test_default_pins_are_supported():
    assert matrix.check_spec(_spec()) == []


@pytest.mark.parametrize(
    ("software", "key"),
    [
        ({"driver_branch": "999"}, "software.driver_branch"),
        ({"driver_branch": "535"}, "software.cuda"),  # 535 cannot run CUDA 13
        ({"driver_branch": "535", "cuda": "12.2", "nccl": "2.19.3", "dcgm_major": 3}, "software.driver_branch"),
        ({"nccl": "2.18.3"}, "software.nccl"),  # built for CUDA 12.2, not 13.0
        ({"dcgm_major": 3}, "software.dcgm_major"),
        ({"nccl_tests": "9.9.9"}, "software.nccl_tests"),
        ({"rdma_stack": "doca"}, "software.doca_ofed"),  # doca without a version
        ({"rdma_stack": "doca", "doca_ofed": "2.9.1"}, "software.doca_ofed"),  # not qualified with 580
        ({"doca_ofed": "3.1.0"}, "software.doca_ofed"),  # a DOCA version with the distro stack
        ({"probe_torch": "1.13.1"}, "software.probe_torch"),  # not in the matrix
        ({"driver_version": "575.64.05"}, "software.driver_version"),  # a release of another branch
        ({"driver_version": "580.65.05"}, "software.driver_version"),  # older than the branch's CUDA 13 floor
        # torch 2.9.1's PyPI wheel runs CUDA 12.8, which R535 cannot
        ({"driver_branch": "535", "cuda": "12.2", "nccl": "2.19.3", "dcgm_major": 3}, "software.probe_torch"),
    ],
)
def test_unsupported_pins_name_the_key(software, key):
    errors = matrix.check_spec(_spec(**software))
    assert errors and all(e.startswith("software.") for e in errors)
    assert any(e.startswith(key + ":") for e in errors), errors


def test_a_pinned_driver_release_reaches_the_driver_role():
    assert matrix.check_spec(_spec(driver_version="580.65.06")) == []  # the floor itself
    spec = _spec(driver_version="580.95.05")
    assert matrix.check_spec(spec) == []
    assert role_vars(spec, spec.node_groups[0])["gridready_nvidia_driver_version"] == "580.95.05"
    unpinned = _spec()
    assert role_vars(unpinned, unpinned.node_groups[0])["gridready_nvidia_driver_version"] == ""


def test_require_supported_raises_invalid_input_with_the_file():
    with pytest.raises(InvalidInput) as err:
        matrix.require_supported(_spec(driver_branch="999"), "inventories/acme/cluster.yml")
    assert err.value.lines[0].startswith("inventories/acme/cluster.yml: software.driver_branch: 999")


def test_matrix_rejects_a_row_without_a_known_source(tmp_path):
    data = yaml.safe_load(matrix.MATRIX_PATH.read_text())
    data["cuda"]["13.0"]["sources"] = ["nowhere"]
    bad = tmp_path / "m.yml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match="unknown source 'nowhere'"):
        matrix.load(bad)


def test_role_vars_for_an_hgx_h200_group():
    spec = _spec(rdma_stack="doca", doca_ofed="3.1.0")
    spec.node_groups[0].nics = []
    got = role_vars(spec, spec.node_groups[0])
    assert got["gridready_preflight_gpu_device_id"] == "0x2335"
    assert got["gridready_preflight_gpu_count"] == 8
    assert got["gridready_preflight_supported_os"] == ["Ubuntu-22"]
    assert got["gridready_fabricmanager_nvswitch"] is True
    assert got["gridready_dcgm_cuda_major"] == "13"
    assert got["gridready_nccl_cuda"] == "13.0"
    assert got["gridready_rdma_enabled"] is False  # no HCAs in this group
    assert got["gridready_rdma_doca_version"] == "3.1.0"


def test_a_pinned_mirror_key_reaches_the_driver_role_as_one_hex_string():
    spec = _spec(package_mirror="http://mirror.example.internal/cuda/",
                 package_mirror_key_fingerprint="eb69 3b30 35cd 5710 e231 e123 a4b4 6996 3bf8 63cc")
    got = role_vars(spec, spec.node_groups[0])
    assert got["gridready_nvidia_driver_repo_url"] == "http://mirror.example.internal/cuda/"
    assert got["gridready_nvidia_driver_repo_key_fingerprint"] == "EB693B3035CD5710E231E123A4B469963BF863CC"
    specs = yaml.safe_load((Path(__file__).resolve().parents[2] / "roles/gridready_nvidia_driver/meta"
                            "/argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert "gridready_nvidia_driver_repo_key_fingerprint" in specs


@pytest.mark.parametrize("name", ["sandbox", "local", "acme-h200"])
def test_role_vars_of_the_committed_inventories_are_valid_role_options(name):
    inv = inventory.load(name)
    specs = {}
    for f in (Path(__file__).resolve().parents[2] / "roles").glob("gridready_*/meta/argument_specs.yml"):
        specs.update(yaml.safe_load(f.read_text())["argument_specs"]["main"]["options"])
    for group in inv.spec.node_groups:
        unknown = set(role_vars(inv.spec, group)) - set(specs)
        assert not unknown


def test_local_h200_group_needs_no_fabric_manager():
    inv = inventory.load("local")
    got = role_vars(inv.spec, inv.spec.node_groups[0])
    assert got["gridready_fabricmanager_nvswitch"] is False  # 2 GPUs: no NVSwitch baseboard
    assert got["gridready_rdma_enabled"] is False


@pytest.mark.parametrize("branch", ["535", "570", "575"])
def test_end_of_life_branches_are_refused_with_a_clear_line(branch):
    errors = matrix.check_spec(_spec(driver_branch=branch))
    line = next(e for e in errors if e.startswith("software.driver_branch:"))
    assert f"R{branch} (" in line and "is end of life" in line
    assert line.endswith("use R580 (long-term support, end of life 2028-06)")


def test_r580_is_the_supported_long_term_branch():
    row = matrix.load().driver_branches["580"]
    assert (row.designation, row.status, row.eol) == ("long-term support", "supported", "2028-06")


def test_every_package_name_and_dcgm_package_carries_a_source(tmp_path):
    m = matrix.load()
    assert {"nvidia-fabricmanager", "libnvidia-nscq", "nvidia-driver-pinning-<branch>"} <= set(m.packages)
    assert all(p.sources for p in m.packages.values())
    data = yaml.safe_load(matrix.MATRIX_PATH.read_text())
    del data["cuda"]["13.0"]["dcgm"]["4"]["sources"]
    bad = tmp_path / "m.yml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match="sources"):
        matrix.load(bad)


def test_invoke_validate_refuses_an_end_of_life_branch(tmp_path):
    src = Path(inventory.__file__).resolve().parents[1] / "inventories" / "sandbox"
    inv = tmp_path / "sandbox"
    shutil.copytree(src, inv)
    cluster = inv / "cluster.yml"
    data = yaml.safe_load(cluster.read_text())
    data.setdefault("software", {})["driver_branch"] = "570"
    cluster.write_text(yaml.safe_dump(data))
    inventory.load(inv)  # the spec itself is valid: the matrix refuses it, in what every task loads
    with pytest.raises(InvalidInput) as err:
        cli.inventory(str(inv))
    assert any(line.endswith("cluster.yml: software.driver_branch: R570 (production branch) is end of life (no "
                             "longer listed as supported); use R580 (long-term support, end of life 2028-06)")
               for line in err.value.lines), err.value.lines


def test_role_vars_enforce_the_matrix_fields():
    spec = _spec()
    spec.node_groups[0].nics = [Nic(name="mlx5_0", kind="roce", rate_gbps=400, netdev="enp25s0np0", mtu=4200)]
    got = role_vars(spec, spec.node_groups[0])
    assert got["gridready_preflight_min_kernel"] == "5.15"  # os.Ubuntu-22.min_kernel
    assert got["gridready_nvidia_driver_min_version"] == "580.65.06"  # max(branch min, CUDA 13.0 min_driver)
    assert got["gridready_nvidia_driver_open_kernel_modules"] is True
    assert got["gridready_rdma_min_rdma_core"] == "39.0"  # rdma.distro.rdma_core Ubuntu-22
    assert got["gridready_rdma_roce_nics"] == [{"netdev": "enp25s0np0", "mtu": 4200}]


def test_the_probe_runtime_follows_the_spec_and_its_index():
    got = role_vars(_spec(probe_torch="2.8.0", python_index="https://pypi.example.internal/simple/"),
                    NodeGroup(name="gpu_nodes", sku="h200"))
    assert got["gridready_probe_runtime_enabled"] is True
    assert got["gridready_probe_runtime_torch_version"] == "2.8.0"
    assert got["gridready_probe_runtime_pip_args"] == ["--index-url", "https://pypi.example.internal/simple/"]
    none = role_vars(_spec(probe_torch=None), NodeGroup(name="gpu_nodes", sku="h200"))
    assert none["gridready_probe_runtime_enabled"] is False and matrix.check_spec(_spec(probe_torch=None)) == []


def test_nvidia_peermem_is_asked_for_only_where_it_is_the_gpudirect_path():
    """The open kernel modules carry GPUDirect RDMA through DMA-BUF, over DOCA as well (issue 28, finding 2):
    nvidia-peermem built before DOCA-OFED is a stub whose init fails, and NCCL takes DMA-BUF by itself."""
    group = NodeGroup(name="gpu_nodes", sku="h200", nics=[Nic(name=f"mlx5_{i}", kind="infiniband", rate_gbps=400)
                                                          for i in range(8)])
    doca = role_vars(_spec(rdma_stack="doca", doca_ofed="3.1.0"), group)
    assert doca["gridready_rdma_enabled"] and doca["gridready_nvidia_driver_open_kernel_modules"]
    assert doca["gridready_rdma_peermem"] is False


def test_the_reference_inventory_gets_a_verified_nccl_tests_source():
    """Issue 28, finding 10: the matrix knows no checksum of upstream's archive, so the nccl role stopped at its
    checksum assert on every real inventory; the role now gets the release gridready ships and its checksum."""
    inv = inventory.load(REPO / "inventories" / "acme-h200")
    got = role_vars(inv.spec, inv.spec.node_groups[0])
    tarball = Path(got["gridready_nccl_tests_bundled_tarball"])
    assert tarball.name == f"nccl-tests-{inv.spec.software.nccl_tests}.tar.gz"
    algo, digest = got["gridready_nccl_tests_bundled_checksum"].split(":")
    assert algo == "sha256" and hashlib.sha256(tarball.read_bytes()).hexdigest() == digest
    with tarfile.open(tarball) as tar:  # the release's own sources, under the prefix the role unpacks
        names = tar.getnames()
    assert f"nccl-tests-{inv.spec.software.nccl_tests}/src/all_reduce.cu" in names
    assert "gridready_nccl_tests_checksum" not in got  # no upstream checksum is claimed


def test_the_nccl_role_takes_the_bundled_release_only_when_nothing_else_is_named():
    rendered = {}
    for case, given in {"bundled": {}, "url": {"gridready_nccl_tests_checksum": "sha256:" + "a" * 64},
                        "controller": {"gridready_nccl_tests_src_tarball": "/srv/n.tar.gz",
                                       "gridready_nccl_tests_checksum": "sha256:" + "b" * 64}}.items():
        v = aptroot_role_vars("gridready_nccl", "Debian-12", gridready_nccl_tests_bundled_tarball="/g/n.tar.gz",
                              gridready_nccl_tests_bundled_checksum="sha256:" + "c" * 64, **given)
        rendered[case] = (v["__gridready_nccl_tests_from_controller"], v["__gridready_nccl_tests_sha"])
    assert rendered == {"bundled": ("/g/n.tar.gz", "sha256:" + "c" * 64), "url": ("", "sha256:" + "a" * 64),
                        "controller": ("/srv/n.tar.gz", "sha256:" + "b" * 64)}


def test_every_os_the_spec_accepts_has_a_row_and_a_vars_file_in_every_dispatching_role() -> None:
    """A node group's `os` reaches the roles as vars/<Distribution>-<major>.yml: an OS the spec accepts without
    its file stops provision on the host (include_vars), one without a matrix row stops validate."""
    from typing import get_args

    from gridready import matrix
    from gridready.spec.cluster import NodeGroup

    accepted = set(get_args(NodeGroup.model_fields["os"].annotation))
    assert accepted == set(matrix.OS_KEYS) and "debian-13" in accepted
    rows = matrix.load().os
    roles = Path(__file__).resolve().parents[2] / "roles"
    dispatching = [r for r in sorted(roles.iterdir()) if (r / "vars" / "Debian-12.yml").exists()]
    assert len(dispatching) >= 9
    for os_name, key in matrix.OS_KEYS.items():
        assert key in rows, os_name
        missing = [r.name for r in dispatching if not (r / "vars" / f"{key}.yml").exists()]
        assert missing == [], f"{os_name}: no vars/{key}.yml in {missing}"
