"""library/gridready_peermem_build.py (issue 28, finding 2): nvidia-peermem built by DKMS before DOCA-OFED is a stub
whose init returns -EINVAL; the RDMA role used to modprobe it as it was. Commands answer as modinfo(8) and dkms(8)
print (`-F depends` is one comma-separated line; dkms 3.x and 2.8 status lines)."""

from __future__ import annotations

import pytest

from tests import library_modules

mod = library_modules.load("gridready_peermem_build")
K = "6.8.0-49-generic"


class Host:
    """modinfo and dkms of a host whose nvidia-peermem is a stub until a dkms install runs with DOCA present."""

    def __init__(self, *, real: bool, dkms_status: str = f"nvidia/580.95.05, {K}, x86_64: installed\n",
                 builds_real: bool = True):
        self.real, self.status, self.builds_real, self.calls = real, dkms_status, builds_real, []

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(argv)
        if argv[0] == "modinfo":
            return 0, ("nvidia,ib_core\n" if self.real else "nvidia\n"), ""
        if argv[:2] == ["dkms", "status"]:
            return 0, self.status, ""
        if argv[:2] == ["dkms", "install"]:
            self.real = self.builds_real
        return 0, "", ""


def test_a_stub_built_before_doca_is_rebuilt_then_real(tmp_path):
    symvers = tmp_path / "Module.symvers"
    symvers.write_text("0x0\tib_register_peer_memory_client\tdrivers/infiniband/core/ib_core\tEXPORT_SYMBOL\n")
    host = Host(real=False)
    changed, msg = mod.ensure(K, False, str(symvers), host.run, check=False)
    assert changed and "rebuilt nvidia/580.95.05" in msg
    assert ["dkms", "remove", "-m", "nvidia", "-v", "580.95.05", "-k", K] in host.calls
    assert host.calls.index(["dkms", "install", "-m", "nvidia", "-v", "580.95.05", "-k", K]) > host.calls.index(
        ["dkms", "remove", "-m", "nvidia", "-v", "580.95.05", "-k", K])


def test_a_real_build_is_left_alone_unless_doca_changed(tmp_path):
    symvers = tmp_path / "Module.symvers"
    symvers.write_text("")
    host = Host(real=True)
    assert mod.ensure(K, False, str(symvers), host.run, check=False)[0] is False
    assert not [c for c in host.calls if c[0] == "dkms"]
    assert mod.ensure(K, True, str(symvers), host.run, check=False)[0] is True  # new DOCA symbol versions


def test_without_docas_symbols_it_fails_naming_them(tmp_path):
    with pytest.raises(RuntimeError, match=r"Module\.symvers is missing"):
        mod.ensure(K, False, str(tmp_path / "Module.symvers"), Host(real=False).run, check=False)


def test_a_rebuild_that_stays_a_stub_fails(tmp_path):
    symvers = tmp_path / "Module.symvers"
    symvers.write_text("")
    with pytest.raises(RuntimeError, match="still a stub"):
        mod.ensure(K, False, str(symvers), Host(real=False, builds_real=False).run, check=False)


def test_check_mode_reports_the_rebuild_and_runs_nothing(tmp_path):
    symvers = tmp_path / "Module.symvers"
    symvers.write_text("")
    host = Host(real=False)
    assert mod.ensure(K, False, str(symvers), host.run, check=True)[0] is True
    assert [c[0] for c in host.calls] == ["modinfo"]


@pytest.mark.parametrize("status", [f"nvidia/580.95.05, {K}, x86_64: installed\n",  # dkms 3.x
                                    f"nvidia, 580.95.05, {K}, x86_64: installed\n"])  # dkms 2.8 (Ubuntu 22.04)
def test_both_dkms_status_formats_name_the_version(status):
    assert mod.dkms_version(status + "nvidia/570.1, 5.15.0-1-generic, x86_64: installed\n", K) == "580.95.05"
    assert mod.dkms_version(status, "5.15.0-1-generic") is None
