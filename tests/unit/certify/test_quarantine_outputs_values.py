"""The scheduler-side quarantine outputs, byte for byte: the Ansible group, the Kubernetes labels/taints/annotations
and the Slurm drain script an operator reviews before running it."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from gridready.certify.quarantine import k8s_node_patches, quarantine_yml, slurm_drain_commands, write_outputs

HEAD = "# Written by gridready certify: hosts that failed fabric or node certification. Do not edit.\n"
LONG = "xid: " + "Xid 79 GPU has fallen off the bus " * 10  # 345 characters


def test_quarantine_yml_names_each_host_with_its_reason_and_run() -> None:
    text = quarantine_yml({"n2": "xid: Xid 79", "n1": "ecc: 3 uncorrected"}, "run-7")
    assert text == HEAD + (
        "all:\n  children:\n    gridready_quarantine:\n      hosts:\n"
        "        n1:\n          gridready_quarantine_reason: 'ecc: 3 uncorrected'\n"
        "          gridready_quarantine_run: run-7\n"
        "        n2:\n          gridready_quarantine_reason: 'xid: Xid 79'\n"
        "          gridready_quarantine_run: run-7\n")


def test_quarantine_yml_without_a_run_id_keeps_a_long_reason_on_one_line() -> None:
    reason = LONG[:150]
    text = quarantine_yml({"n1": reason})
    assert text == HEAD + f"all:\n  children:\n    gridready_quarantine:\n      hosts:\n        n1:\n" \
                          f"          gridready_quarantine_reason: '{reason}'\n"
    assert yaml.safe_load(text) == {"all": {"children": {"gridready_quarantine": {"hosts": {
        "n1": {"gridready_quarantine_reason": reason}}}}}}


def test_a_reason_past_the_200_column_width_folds_and_reads_back_whole() -> None:
    reason = ("x: " * 100)[:163].strip()  # quoted (": "), 210 columns with its key and indent
    lines = quarantine_yml({"n1": reason}).splitlines()
    assert [len(ln) for ln in lines[1:]] == [4, 11, 25, 12, 11, 201, 14]  # folded once, at PyYAML's width 200
    assert yaml.safe_load("\n".join(lines))["all"]["children"]["gridready_quarantine"]["hosts"]["n1"] == {
        "gridready_quarantine_reason": reason}


def test_an_empty_quarantine_is_an_empty_group() -> None:
    assert quarantine_yml({}) == HEAD + "all:\n  children:\n    gridready_quarantine:\n      hosts: {}\n"


def test_k8s_patches_label_every_node_and_taint_the_quarantined() -> None:
    assert k8s_node_patches(["b", "a"], {"c": LONG}) == [
        {"node": "a", "labels": {"gridready.io/certified": "true"}, "annotations": {}, "taints": []},
        {"node": "b", "labels": {"gridready.io/certified": "true"}, "annotations": {}, "taints": []},
        {"node": "c", "labels": {"gridready.io/certified": "false"},
         "annotations": {"gridready.io/quarantine-reason": LONG[:250]},
         "taints": [{"key": "gridready.io/quarantined", "value": "true", "effect": "NoSchedule"}]},
    ]
    assert len(LONG[:250]) == 250


def test_slurm_reasons_are_trimmed_and_quoted() -> None:
    assert slurm_drain_commands({"n 2": "xid: it's bad", "n1": LONG}) == [
        "scontrol update nodename='n 2' state=drain reason='gridready: xid: it'\"'\"'s bad'",
        f"scontrol update nodename=n1 state=drain reason='gridready: {LONG[:88]}'",
    ]


def test_write_outputs_writes_the_three_files(tmp_path: Path) -> None:
    paths = write_outputs(tmp_path / "out", ["b", "a"], {"c": "xid: Xid 48"}, run_id="r9")
    assert paths == {"quarantine_yml": tmp_path / "out/quarantine.yml", "k8s": tmp_path / "out/k8s-node-patches.json",
                     "slurm": tmp_path / "out/slurm-drain.sh"}
    assert paths["quarantine_yml"].read_text() == quarantine_yml({"c": "xid: Xid 48"}, "r9")
    k8s = paths["k8s"].read_text()
    assert k8s == json.dumps(k8s_node_patches(["a", "b"], {"c": "xid: Xid 48"}), indent=2) + "\n"
    assert k8s.startswith('[\n  {\n    "node": "a",')
    assert paths["slurm"].read_text() == (
        "#!/bin/sh\n# gridready: drain quarantined nodes (review before running)\n"
        "scontrol update nodename=c state=drain reason='gridready: xid: Xid 48'\n")
    two = write_outputs(tmp_path / "two", [], {"d": "ecc: 2", "c": "xid: Xid 48"})["slurm"].read_text()
    assert two.splitlines()[2:] == ["scontrol update nodename=c state=drain reason='gridready: xid: Xid 48'",
                                    "scontrol update nodename=d state=drain reason='gridready: ecc: 2'"]


def test_write_outputs_with_nothing_quarantined(tmp_path: Path) -> None:
    paths = write_outputs(tmp_path, ["a"], {})
    assert paths["slurm"].read_text() == "#!/bin/sh\n# gridready: drain quarantined nodes (review before running)\n"
    assert "gridready_quarantine_run" not in paths["quarantine_yml"].read_text()
