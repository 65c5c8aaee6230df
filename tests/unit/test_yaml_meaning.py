"""Trust boundaries, YAML as YAML means it (issue 41, class 5): in a `<<` merge the mapping's own keys win; an
explicit tag other than the core schema's plain ones is refused with file, key, line and column; YAML 1.1's
on/off/yes/no where a number is asked, and strings or numbers where a boolean is asked, are refused."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from gridready.errors import InvalidInput
from gridready.inventory import load
from gridready.yamlio import YamlError, load_yaml

from .test_inventory_errors import CLUSTER, HOSTS, make_inventory

C = "inventories/acme/cluster.yml: "
H = "inventories/acme/hosts.yml: "
G = "inventories/acme/group_vars/all.yml: "
NIC = "{name: mlx5_0, kind: infiniband, rate_gbps: 400, rail: 0}"
# cluster.yml with a node-group template merged into the real group, which overrides gpus_per_node
MERGED = f"""\
customer: acme
x-defaults: &defaults
  name: template
  sku: H200-SXM-141GB
  gpus_per_node: 4
  nics: [{NIC}]
node_groups:
  - <<: *defaults
    name: gpu_nodes
    gpus_per_node: 8
certification: {{min_certified_nodes: 1}}
"""


def _cluster_text(text: str, tmp_path, monkeypatch):
    inv = make_inventory(tmp_path)
    (inv / "cluster.yml").write_text(text)
    monkeypatch.chdir(tmp_path)
    return inv


def _lines(tmp_path, monkeypatch, cluster: dict | None = None, hosts: str = HOSTS,
           files: dict[str, str] | None = None) -> list[str]:
    inv = make_inventory(tmp_path, cluster=cluster, hosts=hosts)
    for rel, text in (files or {}).items():
        (inv / rel).parent.mkdir(parents=True, exist_ok=True)
        (inv / rel).write_text(text)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput) as err:
        load("acme")
    return err.value.lines


# ---- merges -------------------------------------------------------------------------------------------------------

def test_a_merged_mapping_is_overridden_by_the_mappings_own_keys(tmp_path, monkeypatch):
    _cluster_text(MERGED, tmp_path, monkeypatch)
    doc = load_yaml(tmp_path / "inventories/acme/cluster.yml")
    group = doc["node_groups"][0]
    assert group["name"] == "gpu_nodes" and group["gpus_per_node"] == 8 and group["sku"] == "H200-SXM-141GB"
    assert "<<" not in group


def test_an_inventory_built_with_a_merge_loads(tmp_path, monkeypatch):
    """The spec's own keys win over the template's; the template itself is refused as an unknown key only."""
    inv = make_inventory(tmp_path)
    (inv / "group_vars").mkdir()
    (inv / "group_vars" / "all.yml").write_text(
        "base: &base {gridready_a: 1, gridready_b: 2}\nsettings:\n  <<: *base\n  gridready_b: 3\n")
    monkeypatch.chdir(tmp_path)
    assert load("acme").customer == "acme"
    assert load_yaml(inv / "group_vars" / "all.yml")["settings"] == {"gridready_a": 1, "gridready_b": 3}


def test_of_several_merged_mappings_the_first_listed_wins(tmp_path):
    path = tmp_path / "m.yml"
    path.write_text("a: &a {k: 1, x: 1}\nb: &b {k: 2, y: 2}\nc:\n  <<: [*a, *b]\n  z: 3\n")
    assert load_yaml(path)["c"] == {"k": 1, "x": 1, "y": 2, "z": 3}


@pytest.mark.parametrize(("text", "where"), [
    ("a: {k: 1, k: 2}\n", "line 1 column 11"),
    ("a: &a {k: 1}\nb: {<<: *a, <<: *a}\n", "line 2 column 13"),
    ("a: &a {k: 1}\nb:\n  <<: *a\n  j: 1\n  j: 2\n", "line 5 column 3"),
])
def test_a_key_repeated_among_the_mappings_own_keys_is_still_refused(tmp_path, text, where):
    path = tmp_path / "d.yml"
    path.write_text(text)
    with pytest.raises(YamlError, match="duplicate key") as err:
        load_yaml(path)
    assert err.value.where == where


# ---- explicit tags ------------------------------------------------------------------------------------------------

TAGS = [
    ("binary-name", "name: llama", "name: !!binary bGxhbWE=", "serving.tiers[0].name", "!!binary"),
    ("binary-hf-id", "hf_id: meta-llama/Llama-3.1-8B-Instruct", "hf_id: !!binary bWV0YS1sbGFtYS9MbGFtYQ==",
     "serving.tiers[0].model.hf_id", "!!binary"),
    ("python-object", "served_name: llama", "served_name: !!python/object/apply:os.system ['true']",
     "serving.tiers[0].served_name", "!!python/object/apply:os.system"),
    ("set-where-a-list", "waive: []", "waive: !!set {probe: null}", "certification.waive", "!!set"),
    ("omap", "min_certified_nodes: 1", "min_certified_nodes: !!omap [{a: 1}]", "certification.min_certified_nodes",
     "!!omap"),
    ("timestamp", "customer: acme", "customer: !!timestamp 2026-01-01", "customer", "!!timestamp"),
    ("local-tag", "customer: acme", "customer: !Ref acme", "customer", "!Ref"),
]


def _cluster_yaml() -> str:
    doc = copy.deepcopy(CLUSTER)
    doc["certification"]["waive"] = []
    return yaml.safe_dump(doc, sort_keys=False, width=1000)


@pytest.mark.parametrize(("plain", "tagged", "key", "tag"), [t[1:] for t in TAGS], ids=[t[0] for t in TAGS])
def test_an_explicit_tag_is_refused_with_file_key_line_and_column(tmp_path, monkeypatch, plain, tagged, key, tag):
    text = _cluster_yaml()
    assert plain in text
    _cluster_text(text.replace(plain, tagged, 1), tmp_path, monkeypatch)
    with pytest.raises(InvalidInput) as err:
        load("acme")
    line = next(ln for ln in err.value.lines if ln.startswith(C))
    assert re.match(rf"{re.escape(C)}line [0-9]+ column [0-9]+: {re.escape(key)}: the tag {re.escape(tag)} is not "
                    "allowed here", line), line


@pytest.mark.parametrize(("rel", "text", "expected"), [
    ("hosts.yml", HOSTS.replace("gpu01: {}", "gpu01: {ansible_host: !!binary MTAuMC4wLjE=}"),
     H + "line 5 column 31: all.children.gpu_nodes.hosts.gpu01.ansible_host: the tag !!binary is not"),
    ("group_vars/all.yml", "ansible_become_password: !!binary aHVudGVyMg==\n",
     G + "line 1 column 26: ansible_become_password: the tag !!binary is not allowed"),
    ("group_vars/all.yml", "x: !!python/name:os.system ''\n",
     G + "line 1 column 4: x: the tag !!python/name:os.system"),
])
def test_tags_are_refused_in_every_inventory_file(tmp_path, monkeypatch, rel, text, expected):
    files = {rel: text} if rel != "hosts.yml" else {}
    lines = _lines(tmp_path, monkeypatch, hosts=text if rel == "hosts.yml" else HOSTS, files=files)
    assert any(line.startswith(expected) for line in lines), lines
    assert not any("hunter2" in line or "aHVudGVyMg" in line for line in lines)


def test_the_plain_tags_are_allowed(tmp_path, monkeypatch):
    text = _cluster_yaml().replace("customer: acme", "customer: !!str acme", 1)
    text = text.replace("min_certified_nodes: 1", "min_certified_nodes: !!int 1", 1)
    _cluster_text(text, tmp_path, monkeypatch)
    assert load("acme").spec.certification.min_certified_nodes == 1


# ---- YAML 1.1 booleans and strings where numbers or booleans are asked ---------------------------------------------

def _set(section: str, key: str, value: object) -> dict:
    doc = copy.deepcopy(CLUSTER)
    target = doc["node_groups"][0] if section == "node_groups[0]" else doc[section]
    target[key] = value
    return doc


NUMBERS = [
    ("on-for-gpus", "node_groups[0]", "gpus_per_node", True, "not a boolean"),
    ("off-for-min-nodes", "certification", "min_certified_nodes", False, "not a boolean"),
    ("quoted-number", "node_groups[0]", "gpus_per_node", "8", "not a quoted string"),
    ("word", "certification", "min_certified_nodes", "one", "unable to parse string as an integer"),
]


@pytest.mark.parametrize(("section", "key", "value", "why"), [n[1:] for n in NUMBERS], ids=[n[0] for n in NUMBERS])
def test_a_boolean_or_a_string_where_a_number_is_asked_is_refused(tmp_path, monkeypatch, section, key, value, why):
    lines = _lines(tmp_path, monkeypatch, _set(section, key, value))
    assert any(line.startswith(f"{C}{section}.{key}: Input should be a valid integer, {why}")
               for line in lines), lines


@pytest.mark.parametrize("word", ["on", "yes", "Off", "NO"])
def test_yaml_1_1_boolean_words_are_refused_where_a_number_is_asked(tmp_path, monkeypatch, word):
    text = _cluster_yaml().replace("gpus_per_node: 8", f"gpus_per_node: {word}", 1)
    _cluster_text(text, tmp_path, monkeypatch)
    with pytest.raises(InvalidInput) as err:
        load("acme")
    assert f"{C}node_groups[0].gpus_per_node: Input should be a valid integer, not a boolean" in str(err.value)


@pytest.mark.parametrize(("value", "why"), [("yes", "not a string"), ("true", "not a string"), (1, "not a number")])
def test_a_string_or_number_where_a_boolean_is_asked_is_refused(tmp_path, monkeypatch, value, why):
    doc = copy.deepcopy(CLUSTER)
    doc["software"] = {"python_index_plain_http": value}
    lines = _lines(tmp_path, monkeypatch, doc)
    assert f"{C}software.python_index_plain_http: Input should be a valid boolean (true or false), {why}" in lines


def test_a_whole_number_where_a_float_is_asked_is_still_a_number(tmp_path, monkeypatch):
    """Strict numbers keep what YAML means: 1 where a share is asked is the number 1.0."""
    doc = copy.deepcopy(CLUSTER)
    doc["serving"]["tiers"][0]["slo"] = {"goodput_min": 1}
    make_inventory(tmp_path, cluster=doc)
    monkeypatch.chdir(tmp_path)
    assert load("acme").spec.serving.tiers[0].slo.goodput_min == 1.0
