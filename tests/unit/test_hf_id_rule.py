"""The model id pattern (gridready/spec/rules.py HF_ID) against huggingface_hub's validate_repo_id: ids that only its
`--`/`..` rule refuses, so no other part of the pattern can refuse them in its place (issue #35)."""

from __future__ import annotations

import copy

import pytest

from gridready.errors import InvalidInput
from gridready.inventory import load
from gridready.spec.rules import HF_ID
from tests.unit.test_inventory_errors import CLUSTER, make_inventory

VALID = ["meta-llama/Llama-3.1-8B-Instruct", "BAAI/bge-small-en-v1.5", "Qwen/Qwen2.5-72B-Instruct",
         "a/b", "org_1/m.o-d_e", "nvidia/Llama-3.1-Nemotron-70B-Instruct-HF"]
# Each is valid character by character, starts with a letter, has one '/', and is short: only `--`/`..` is wrong.
DOUBLED = ["meta-llama/Llama..3", "meta--llama/Llama-3", "meta-llama/Llama--3", "org..x/model", "a/b..", "a/b--c"]


@pytest.mark.parametrize("hf_id", VALID)
def test_valid_ids_match(hf_id: str) -> None:
    assert HF_ID.match(hf_id)


@pytest.mark.parametrize("hf_id", DOUBLED)
def test_doubled_dots_or_dashes_are_refused(hf_id: str) -> None:
    assert HF_ID.match(hf_id.replace("..", ".").replace("--", "-"))  # the same id with one of them passes
    assert HF_ID.match(hf_id) is None


@pytest.mark.parametrize("hf_id", ["meta-llama/Llama..3", "meta--llama/Llama-3"])
def test_inventory_with_a_doubled_id_names_the_key(tmp_path, monkeypatch, hf_id: str) -> None:
    cluster = copy.deepcopy(CLUSTER)
    cluster["serving"]["tiers"][0]["model"]["hf_id"] = hf_id
    make_inventory(tmp_path, cluster=cluster)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput) as err:
        load("acme")
    (line,) = err.value.lines
    assert line.startswith("inventories/acme/cluster.yml: serving.tiers[0].model.hf_id: must be a Hugging Face repo id")
