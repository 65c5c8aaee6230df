"""Simulated `lspci` / `lspci -vvv`: the PCIe tree of the profile, in pciutils' own layout.

The layout follows a real HGX H100 `lspci -vvv` (leptonai/gpud pkg/pci/testdata/lspci-vvv, in
tests/fixtures/public/lspci): per GPU a PEX890xx switch whose upstream port (bus S-1) covers the GPU's downstream
port (S:00.0) and the HCA's (S:01.0); `LnkCap`/`LnkSta` lines (`Speed 32GT/s, Width x16`, `(downgraded)` when the
link trained lower), and `ACSCtl` on the switch ports. The first switch also carries the benign Gen4 port 17:03.0
above a ConnectX-6 Dx, as sysfs does (sim/sysfs.py). A VM slice (platform passthrough) sees its GPUs behind
virtual root ports without ACS. Without -v only the one-line headers are printed.
Marker: a `gridready-sim` device (ff:1f.7 "Unassigned class") names the profile.
Fault acs_redirect (GPU): ReqRedir+ CmpltRedir+ on the switch port above that GPU, as a BIOS default or
intel_iommu=on leaves it (NCCL troubleshooting guide, "PCI Access Control Services (ACS)").
Options as pciutils' lspci(8) parses them with getopt: -v (repeatable), -D (always show the domain); any other
option is refused as getopt refuses it ("invalid option"), with lspci's usage line and exit status 2.
"""

from __future__ import annotations

import sys

from . import simcore
from .simcore import Host

SPEED = {1: "2.5GT/s", 2: "5GT/s", 3: "8GT/s", 4: "16GT/s", 5: "32GT/s"}
ACS_OFF = "SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"
ACS_REDIRECT = "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
SWITCH = "Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0) (prog-if 00 [Normal decode])"


def _link(cap: tuple[int, int], sta: tuple[int, int]) -> list[str]:
    down_speed = " (downgraded)" if sta[0] < cap[0] else ""
    down_width = " (downgraded)" if sta[1] < cap[1] else ""
    return [f"LnkCap:\tPort #0, Speed {SPEED[cap[0]]}, Width x{cap[1]}, ASPM not supported",
            f"LnkSta:\tSpeed {SPEED[sta[0]]}{down_speed}, Width x{sta[1]}{down_width}"]


def _bridge(bdf: str, secondary: int, subordinate: int, link: tuple[int, int], acs: str | None) -> dict:
    body = [f"Bus: primary={int(bdf[:2], 16):02x}, secondary={secondary:02x}, subordinate={subordinate:02x}, "
            "sec-latency=0", *_link((5, 16), link)]
    if acs is not None:
        body += ["ACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+ DirectTrans+",
                 f"ACSCtl:\t{acs}"]
    return {"bdf": bdf, "head": f"PCI bridge: {SWITCH}", "body": body}


def devices(host: Host) -> list[dict]:
    passthrough = host.sku.get("platform") == "passthrough"
    out: list[dict] = []
    hcas = {h.index: h for h in host.hcas}
    for g in host.gpus:
        sw = simcore.SWITCH_BUSES[g.index % 8]
        hca = hcas.get(g.index)
        top = hca.bus if hca else g.bus
        if g.index == 0:
            top = max(top, 0x1B)  # the benign Gen4 port's bus
        if not passthrough:
            out.append(_bridge(f"{sw - 1:02x}:00.0", sw, top, (5, 16), ACS_OFF))
            out.append(_bridge(f"{sw:02x}:00.0", g.bus, g.bus, g.pcie,
                               ACS_REDIRECT if g.has("acs_redirect") else ACS_OFF))
            if hca:
                out.append(_bridge(f"{sw:02x}:01.0", hca.bus, hca.bus, hca.pcie, ACS_OFF))
            if g.index == 0:
                out.append(_bridge(f"{sw:02x}:03.0", 0x1B, 0x1B, (4, 16), ACS_OFF))
        out.append({"bdf": f"{g.bus:02x}:00.0",
                    "head": f"3D controller: NVIDIA Corporation Device {g.sku['device_id'][2:]} (rev a1)",
                    "body": ["Subsystem: NVIDIA Corporation Device 17a6", "Kernel driver in use: nvidia",
                             *_link((g.sku["pcie_gen"], g.sku["pcie_width"]), g.pcie)]})
        if hca:
            kind = "Infiniband controller" if hca.link_layer == "InfiniBand" else "Ethernet controller"
            out.append({"bdf": f"{hca.bus:02x}:00.0", "head": f"{kind}: Mellanox Technologies MT2910 Family "
                        "[ConnectX-7]", "body": ["Kernel driver in use: mlx5_core", *_link((5, 16), hca.pcie)]})
        if g.index == 0 and not passthrough:
            out.append({"bdf": "1b:00.0", "head": "Ethernet controller: Mellanox Technologies MT2892 Family "
                        "[ConnectX-6 Dx]", "body": ["Kernel driver in use: mlx5_core", *_link((4, 16), (4, 16))]})
    out.append({"bdf": "ff:1f.7", "head": f"Unassigned class [ff00]: gridready-sim simulated PCIe tree "
                f"(profile {host.name})", "body": []})
    return sorted(out, key=lambda d: d["bdf"])


def render(host: Host, verbose: int, domain: bool) -> str:
    blocks = []
    for d in devices(host):
        head = ("0000:" if domain else "") + f"{d['bdf']} {d['head']}"
        blocks.append("\n".join([head, *(f"\t{ln}" for ln in d["body"])]) + "\n" if verbose else head + "\n")
    return ("\n".join(blocks) if verbose else "".join(blocks))


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    verbose, domain = 0, False
    for arg in args:
        if not arg.startswith("-") or arg == "-":
            sys.stderr.write(f"lspci: unexpected argument {arg!r}\n")
            return 2
        for ch in arg[1:]:
            if ch == "v":
                verbose += 1
            elif ch == "D":
                domain = True
            else:
                sys.stderr.write(f"lspci: invalid option -- '{ch}'\nUsage: lspci [<switches>]\n")
                return 2
    sys.stdout.write(render(simcore.load(), verbose, domain))
    return 0


if __name__ == "__main__":
    sys.exit(main())
