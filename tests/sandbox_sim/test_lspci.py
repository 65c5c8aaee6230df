"""Simulated `lspci`: the profile's PCIe tree in the layout of a real HGX H100 capture, read by the product's own
parser (gridready.probe.lspci) to the same links as the simulated sysfs; faults show where the real tool shows them."""

from __future__ import annotations

from gridready.probe import lspci as parser
from gridready.probe import sysfs as probe_sysfs
from sandbox.sim import simcore, sysfs

from .conftest import FIXTURES, call

REAL = FIXTURES / "public/lspci/lspci-vvv__HGX-H100-8gpu-CX7-PEX890xx__gpud.txt"


def _keys(text: str) -> set[str]:
    return {ln.strip().split(":")[0] for ln in text.splitlines() if ln.startswith("\t") and ":" in ln}


def test_the_tree_reads_as_sysfs_does(healthy, tmp_path, monkeypatch):
    rc, out = call("lspci", ["-vvv"])
    assert rc == 0 and "gridready-sim simulated PCIe tree" in out
    assert {"Bus", "LnkCap", "LnkSta", "ACSCtl"} <= _keys(out) & _keys(REAL.read_text())  # the real tool's lines
    got = parser.parse(out)
    root = sysfs.write_tree(simcore.load(), tmp_path / "sysfs")
    monkeypatch.setenv("GRIDREADY_SYSFS_ROOT", str(root))
    from_sysfs = {e["bdf"]: e for e in probe_sysfs.pci_endpoints()}
    link = ("gen_current", "gen_max", "width_current", "width_max")
    for e in got["endpoints"]:
        assert e["bdf"] in from_sysfs, e
        assert {k: e[k] for k in link} == {k: from_sysfs[e["bdf"]][k] for k in link}, e["bdf"]
    assert sum(e["kind"] == "gpu" for e in got["endpoints"]) == 8
    assert parser.acs_redirects(got)["redirect_enabled"] == []
    # the benign Gen4 switch port above the ConnectX-6 Dx, as in the real capture
    assert [b["bdf"] for b in got["bridges"] if b["downgraded"]] == ["0000:17:03.0"]


def test_faults_show_in_the_links_and_acs(use_profile):
    use_profile({"kind": "acs_redirect", "gpu": 5}, {"kind": "pcie_downtrained", "gpu": 1})
    got = parser.parse(call("lspci", ["-vvv", "-D"])[1])
    assert parser.acs_redirects(got)["above"] == {"0000:aa:00.0": ["0000:ab:00.0"]}
    slow = [e for e in got["endpoints"] if (e["gen_current"], e["width_current"]) != (e["gen_max"], e["width_max"])]
    assert [(e["bdf"], e["gen_current"], e["width_current"]) for e in slow] == [("0000:2a:00.0", 4, 8)]


def test_one_line_mode_and_refused_options(healthy):
    rc, out = call("lspci", [])
    assert rc == 0 and "\t" not in out and "3D controller: NVIDIA Corporation Device 2335" in out
    rc, out = call("lspci", ["-k"])  # not simulated: refused as getopt refuses an unknown option
    assert rc == 2 and "invalid option -- 'k'" in out
