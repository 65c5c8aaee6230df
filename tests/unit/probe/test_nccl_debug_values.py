"""gridready.probe.nccl_debug by value: the transport family of each `via` text NCCL prints (transport/net.cc
`via NET/%s/%d` with the net plugin's name, p2p.cc `via P2P/...`, shm.cc `via SHM/...`) and the counts and first
examples parse takes from real NCCL_DEBUG=INFO captures (tests/fixtures/public/nccl-debug, SOURCES.md there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridready.probe import nccl_debug

DEBUG = Path(__file__).resolve().parents[2] / "fixtures" / "public" / "nccl-debug"
SOCKET = (DEBUG / "nccl-debug-info__multinode__FAIL-socket-fallback__nccl-issue-952.log").read_text()
P2P = (DEBUG / "nccl-debug-info__8gpu-single-process__PASS-p2p-direct-pointer__nccl-tests-issue-213.log").read_text()


@pytest.mark.parametrize(("via", "fam"), [
    ("NET/IB/0/GDRDMA", "NET/IB"),
    ("NET/IB/3", "NET/IB"),
    ("NET/IB", "NET/IB"),  # two parts: still the net's name
    ("NET/IBext_v8/0/GDRDMA", "NET/IB"),  # the IB plugin (nccl-rdma-sharp-plugins) is InfiniBand verbs too
    ("NET/Socket/3", "NET/Socket"),
    ("NET/Socket", "NET/Socket"),
    ("NET/AWS Libfabric/0", "NET/AWS Libfabric"),  # a plugin name with a space is kept whole
    ("NET", "NET"),  # no net name after it: the first word
    ("P2P/IPC/read", "P2P"),
    ("P2P/direct pointer", "P2P"),
    ("P2P/CUMEM/read", "P2P"),
    ("SHM/direct/direct", "SHM"),
    ("direct shared memory", "direct"),  # NCCL 2.4's SHM text: its first word
    ("CollNet", "CollNet"),
    ("net/IB/0", "net"),  # the family word is case-sensitive: lower-case is no NET
    ("NETX/IB", "NETX"),
    ("ib/IB", "ib"),
])
def test_family_of_each_via_text(via, fam):
    assert nccl_debug.family(via) == fam


def test_net_names_starting_ib_in_lower_case_are_not_infiniband():
    assert nccl_debug.family("NET/ib0/1") == "NET/ib0"
    assert nccl_debug.family("NET/XIB/1") == "NET/XIB"


def test_socket_fallback_capture_counts_each_channel_line():
    got = nccl_debug.parse(SOCKET)
    assert got == {
        "connections": 16,
        "families": {"P2P": 14, "NET/Socket": 2},
        "examples": {
            "P2P": "<cluster_name>:919:1150 [0] NCCL INFO Channel 01/0 : 8[0] -> 15[7] via P2P/IPC/read",
            "NET/Socket": "<cluster_name>:926:1151 [7] NCCL INFO Channel 03/0 : 15[7] -> 6[6] [send] via "
                          "NET/Socket/3",
        },
    }
    assert list(got["families"]) == ["P2P", "NET/Socket"]  # in the order first seen


def test_p2p_capture_is_one_family():
    got = nccl_debug.parse(P2P)
    assert got["connections"] == 17 and got["families"] == {"P2P": 17}
    assert got["examples"] == {"P2P": P2P.splitlines()[0].strip()}


def test_example_is_the_stripped_line_cut_at_300_characters():
    host = "h" * 280
    line = f"  {host}:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/IB/0/GDRDMA  "
    later = "x:1:2 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] [receive] via NET/IB/1"
    got = nccl_debug.parse(f"{line}\n{later}\n")
    assert got["connections"] == 2 and got["families"] == {"NET/IB": 2}
    assert got["examples"]["NET/IB"] == line.strip()[:300]
    assert len(got["examples"]["NET/IB"]) == 300 and got["examples"]["NET/IB"].startswith("hhh")


def test_lines_that_are_not_channel_setup_are_not_counted():
    text = "\n".join([
        "h:1:2 [0] NCCL INFO NET/IB : No device found.",
        "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send]",  # no transport
        "h:1:2 [0] NCCL WARN Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",  # not INFO
        "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [bcast] via P2P/IPC",  # neither send nor receive
        "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC then more",  # words after: kept in the text
        "h:1:2 [0] NCCL INFO Channel 02/1 : 3[0x1a] -> 4[0x2b] [receive] via SHM/direct/direct",
    ])
    assert nccl_debug.parse(text) == {
        "connections": 2, "families": {"P2P": 1, "SHM": 1},
        "examples": {"P2P": "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC then more",
                     "SHM": "h:1:2 [0] NCCL INFO Channel 02/1 : 3[0x1a] -> 4[0x2b] [receive] via SHM/direct/direct"},
    }


def test_nothing_to_read():
    assert nccl_debug.parse("") == {"connections": 0, "families": {}, "examples": {}}
