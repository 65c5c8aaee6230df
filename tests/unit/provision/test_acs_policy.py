"""Issue 28, finding 5: provision asserts ACS with certification's own rule, expecting it off on bare-metal HGX.

The role's filter (playbooks/filter_plugins/gridready_acs.py) is judged on a real HGX H100 `lspci -vvv` capture
(tests/fixtures/public/lspci, from leptonai/gpud): healthy, although six of its bridges show `SrcValid+` and four
`ReqRedir+ CmpltRedir+` (none above a GPU or NIC). The rule before this (source validation on any bridge) would
have stopped that healthy host.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from gridready import inventory
from gridready.provision_vars import role_vars

REPO = Path(__file__).resolve().parents[3]
CAPTURE = REPO / "tests/fixtures/public/lspci/lspci-vvv__HGX-H100-8gpu-CX7-PEX890xx__gpud.txt"


def _filter():
    spec = importlib.util.spec_from_file_location("gridready_acs", REPO / "playbooks/filter_plugins/gridready_acs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.FilterModule().filters()["gridready_acs"]


def test_the_healthy_hgx_capture_has_no_redirection_above_its_gpus_and_nics():
    text = CAPTURE.read_text()
    assert len(re.findall(r"ACSCtl:\tSrcValid\+", text)) == 6  # what the old rule failed on
    got = _filter()(text)
    assert got["redirect_enabled"] == [] and got["bridges_checked"] == 27


def test_redirection_on_a_switch_port_above_a_gpu_is_named():
    text = CAPTURE.read_text()
    state = _filter()(text)
    assert state["bridges_checked"] > 0
    # the same capture with ReqRedir/CmpltRedir turned on at the first switch port above a GPU (what VT-d or a BIOS
    # default does), found by the parser itself
    from gridready.probe import lspci

    bridge = next(b for b in lspci.parse(text)["bridges"] if b["endpoints_below"] and b["acs_ctl"])
    head = re.compile(rf"^{re.escape(bridge['bdf'].removeprefix('0000:'))} ", re.M)
    start = head.search(text).start()
    end = text.find("\n\n", start)
    block = text[start:end].replace("ReqRedir- CmpltRedir-", "ReqRedir+ CmpltRedir+")
    faulty = _filter()(text[:start] + block + text[end:])
    assert faulty["redirect_enabled"] == [bridge["bdf"]]
    assert faulty["above"][bridge["bdf"]] == bridge["endpoints_below"]


def test_hgx_groups_expect_acs_off_unless_the_spec_says_any():
    inv = inventory.load(REPO / "inventories" / "acme-h200")
    group = inv.spec.node_groups[0]
    assert role_vars(inv.spec, group)["gridready_host_tuning_acs"] == "expect_disabled"
    inv.spec.certification.host.acs = "any"
    assert role_vars(inv.spec, group)["gridready_host_tuning_acs"] == "record"


def test_a_single_gpu_host_records_only():
    inv = inventory.load(REPO / "inventories" / "local")
    assert {role_vars(inv.spec, g)["gridready_host_tuning_acs"] for g in inv.spec.node_groups} == {"record"}
