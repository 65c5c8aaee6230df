"""Simulated RDMA tools: `ibstat`, `ibv_devinfo`, `ib_write_bw` (perftest format).

Marker: a `# gridready-sim:` first line (ibstat parsers split on `CA '`; perftest's banner is free text).
ib_write_bw: the server (no host argument) binds the profile's 10.77.0.x address and loopback on -p (default
18515); a client exchanges one JSON line with it and both print min(local, remote) bandwidth. On port 18515 of a
sandbox host the fabric agent answers the client itself (it holds that port), so a client needs no server there.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Any

from . import simcore
from .simcore import Hca, Host

WRITE_EFFICIENCY = 0.96  # ib_write_bw / line rate, healthy NDR (fixtures/public/nhc: 399.6 of 400 with -a peak)
FW = {"InfiniBand": "28.39.1002", "Ethernet": "28.39.1002"}


def ibstat(host: Host, args: list[str]) -> tuple[int, str]:
    names = [a for a in args if not a.startswith("-")]
    hcas = [h for h in host.hcas if not names or h.name == names[0]]
    if names and not hcas:
        return 255, f"ibpanic: [{os.getpid()}] main: stat of IB device '{names[0]}' failed: No such file or directory\n"
    if "-l" in args or "--list_of_cas" in args:
        return 0, "".join(h.name + "\n" for h in hcas)
    if "-p" in args or "--port_list" in args:
        return 0, "".join(h.guid + "\n" for h in hcas)
    out = [simcore.marker(host.name)]
    for h in hcas:
        ib = h.link_layer == "InfiniBand"
        state = "Active" if h.up else "Down"
        phys = "LinkUp" if h.up else ("Polling" if ib else "Disabled")
        out += [
            f"CA '{h.name}'",
            "\tCA type: MT4129",
            "\tNumber of ports: 1",
            f"\tFirmware version: {FW[h.link_layer]}",
            "\tHardware version: 0",
            f"\tNode GUID: {h.guid}",
            f"\tSystem image GUID: {h.guid}",
            "\tPort 1:",
            f"\t\tState: {state}",
            f"\t\tPhysical state: {phys}",
            f"\t\tRate: {h.rate}",
            f"\t\tBase lid: {h.lid if ib and h.up else 0}",
            "\t\tLMC: 0",
            f"\t\tSM lid: {1 if ib and h.up else 0}",
            f"\t\tCapability mask: {'0xa751e848' if ib else '0x00010000'}",
            f"\t\tPort GUID: {h.guid}",
            f"\t\tLink layer: {h.link_layer}",
        ]
    return 0, "\n".join(out) + "\n"


def ibv_devinfo(host: Host, args: list[str]) -> tuple[int, str]:
    dev = simcore.option(args, "-d", "--ib-dev")
    hcas = [h for h in host.hcas if dev is None or h.name == dev]
    if "-l" in args or "--list" in args:
        return 0, f"{len(hcas)} HCAs found:\n" + "".join(f"\t{h.name}\n" for h in hcas)
    out = [simcore.marker(host.name)]
    for h in hcas:
        state = "PORT_ACTIVE (4)" if h.up else "PORT_DOWN (1)"
        out += [
            f"hca_id:\t{h.name}",
            "\ttransport:\t\t\tInfiniBand (0)",
            f"\tfw_ver:\t\t\t\t{FW[h.link_layer]}",
            f"\tnode_guid:\t\t\t{h.guid[2:6]}:{h.guid[6:10]}:{h.guid[10:14]}:{h.guid[14:18]}",
            "\tvendor_id:\t\t\t0x02c9",
            "\tvendor_part_id:\t\t\t4129",
            "\thw_ver:\t\t\t\t0x0",
            "\tboard_id:\t\t\tMT_0000000838",
            "\tphys_port_cnt:\t\t\t1",
            "\t\tport:\t1",
            f"\t\t\tstate:\t\t\t{state}",
            "\t\t\tmax_mtu:\t\t4096 (5)",
            "\t\t\tactive_mtu:\t\t4096 (5)",
            f"\t\t\tsm_lid:\t\t\t{1 if h.up else 0}",
            f"\t\t\tport_lid:\t\t{h.lid if h.up else 0}",
            "\t\t\tport_lmc:\t\t0x00",
            f"\t\t\tlink_layer:\t\t{h.link_layer}",
            "",
        ]
    return 0, "\n".join(out) + "\n"


def local_gbps(host: Host, hca: Hca, cuda: int | None) -> float:
    """What this end can move, Gb/s: the port rate, or the GPU's PCIe link with --use_cuda."""
    bw = hca.rate * WRITE_EFFICIENCY if hca.up else 0.0
    if cuda is not None and cuda < len(host.gpus):
        gen, width = host.gpus[cuda].pcie
        bw = min(bw, simcore.GEN_GBPS_PER_LANE.get(gen, 1.0) * width * 8 * 0.9)
    return bw


def peer_info(host: Host, dev: str | None) -> dict[str, Any]:
    """What this host tells the other end (also sent by the fabric agent on port 18515)."""
    hca = next((h for h in host.hcas if h.name == dev), None) or next(iter(host.hcas), None)
    if hca is None:
        return {"host": host.name, "dev": None, "gbps": 0.0, "up": False}
    return {"host": host.name, "dev": hca.name, "gbps": round(local_gbps(host, hca, None), 2), "up": hca.up}


def _banner(hca: Hca, server: bool) -> list[str]:
    link = "IB" if hca.link_layer == "InfiniBand" else "Ethernet"
    out = (
        []
        if not server
        else [
            "",
            "************************************",
            "* Waiting for client to connect... *",
            "************************************",
        ]
    )
    return [
        *out,
        "---------------------------------------------------------------------------------------",
        "                    RDMA_Write BW Test",
        f" Dual-port       : OFF\t\tDevice         : {hca.name}",
        " Number of qps   : 1\t\tTransport type : IB",
        " Connection type : RC\t\tUsing SRQ      : OFF",
        " PCIe relax order: ON",
        " TX depth        : 128" if not server else " CQ Moderation   : 1",
        " Mtu             : 4096[B]",
        f" Link type       : {link}",
        " Max inline data : 0[B]",
        " rdma_cm QPs\t : OFF",
        " Data ex. method : Ethernet",
        "---------------------------------------------------------------------------------------",
    ]


def _result(size: int, iters: int, gbps: float, gbits: bool) -> list[str]:
    unit = "Gb/sec" if gbits else "MB/sec"
    # perftest's MB is 2**20 bytes, its Gb 10**9 bits (linux-rdma/perftest src/perftest_parameters.c, print_report_bw:
    # format_factor = report_fmt == MBS ? 0x100000 : 125000000)
    peak = gbps if gbits else gbps * 1e9 / 8 / 2**20
    avg = peak * 0.9999
    rate = gbps * 1e9 / 8 / size / 1e6
    return [
        f" #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]",
        f" {size:<10} {iters:<10}       {peak:>10.2f}            {avg:>10.2f}\t\t   {rate:.6f}",
        "---------------------------------------------------------------------------------------",
    ]


def _addresses(host: Host) -> list[str]:
    return [a for a in (host.address, "127.0.0.1") if a]


def ib_write_bw(host: Host, args: list[str]) -> tuple[int, str]:
    dev = simcore.option(args, "-d", "--ib-dev")
    port = int(simcore.option(args, "-p", "--port") or 18515)
    size = int(simcore.option(args, "-s", "--size") or 65536)
    iters = int(simcore.option(args, "-n", "--iters") or 5000)
    cuda_arg = simcore.option(args, "--use_cuda")
    cuda = int(cuda_arg) if cuda_arg is not None else None
    gbits = "--report_gbits" in args
    flags_with_value = {
        "-d",
        "--ib-dev",
        "-p",
        "--port",
        "-s",
        "--size",
        "-n",
        "--iters",
        "--use_cuda",
        "-x",
        "--gid-index",
        "-i",
        "--ib-port",
        "-q",
        "--qp",
        "-D",
        "--duration",
        "-m",
        "--mtu",
    }
    positional = [
        a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] not in flags_with_value)
    ]
    hca = next((h for h in host.hcas if h.name == dev), None) if dev else next(iter(host.hcas), None)
    if hca is None:
        return 1, f" Couldn't get device {dev}\n Unable to find the Infiniband/RoCE device\n"
    if not hca.up:
        return 1, " Port number 1 state is Down\n Couldn't set the link layer\n Couldn't get context for the device\n"
    mine = peer_info(host, hca.name)
    mine["gbps"] = round(local_gbps(host, hca, cuda), 2)
    head = [simcore.marker(host.name)]
    if cuda is not None:
        head += ["initializing CUDA", f"Picking device No. {cuda}", f"[pid = {os.getpid()}] Using CUDA device {cuda}"]
    if positional:  # client
        target = positional[0]
        addr = socket.gethostbyname(target)
        if not (addr.startswith("10.77.0.") or addr.startswith("127.")):
            return 1, f" gridready-sim: refusing to connect outside the sandbox ({target} = {addr})\n"
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection((addr, port), timeout=5) as s:
                    s.sendall((json.dumps({"op": "perftest", **mine}) + "\n").encode())
                    peer = json.loads(s.makefile().readline())
                break
            except (OSError, ValueError):
                if time.monotonic() > deadline:
                    return (
                        1,
                        f"Couldn't connect to {target}:{port}\nUnable to open file descriptor for socket connection\n",
                    )
                time.sleep(0.2)
        gbps = min(mine["gbps"], float(peer.get("gbps", 0.0)))
        lines = head + _banner(hca, False) + _result(size, iters, gbps, gbits)
        return 0, "\n".join(lines) + "\n"
    socks = []
    for a in _addresses(host):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((a, port))
            s.listen(1)
            socks.append(s)
        except OSError:
            s.close()
    if not socks:
        return 1, f" Couldn't listen to port {port}\n"
    import selectors

    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    timeout = float(os.environ.get("GRIDREADY_SIM_PERFTEST_TIMEOUT", "120"))
    ready = sel.select(timeout)
    if not ready:
        return 1, " Timed out waiting for a client\n"
    conn, _ = ready[0][0].fileobj.accept()  # type: ignore[union-attr]
    with conn:
        peer = json.loads(conn.makefile().readline())
        conn.sendall((json.dumps(mine) + "\n").encode())
    for s in socks:
        s.close()
    gbps = min(mine["gbps"], float(peer.get("gbps", 0.0)))
    return 0, "\n".join(head + _banner(hca, True) + _result(size, iters, gbps, gbits)) + "\n"


TOOLS = {"ibstat": ibstat, "ibv_devinfo": ibv_devinfo, "ib_write_bw": ib_write_bw}


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    name = os.path.basename(prog or sys.argv[0])
    tool = TOOLS.get(name, ibstat)
    rc, text = tool(simcore.load(), args)
    (sys.stdout if rc == 0 else sys.stderr).write(text)
    return rc


if __name__ == "__main__":
    sys.exit(main())
