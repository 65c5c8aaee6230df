"""Every committed inventory validates, and the sample lists every key of the spec."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from gridready import sample
from gridready.inventory import load
from gridready.spec import ClusterSpec

REPO = Path(__file__).resolve().parents[2]
INVENTORIES = sorted(p for p in (REPO / "inventories").iterdir() if (p / "cluster.yml").exists())


@pytest.mark.parametrize("inv_dir", INVENTORIES, ids=[p.name for p in INVENTORIES])
def test_committed_inventory_validates(inv_dir, monkeypatch):
    monkeypatch.chdir(REPO)
    inv = load(inv_dir)
    assert inv.gpu_hosts(), f"{inv_dir.name} has no GPU hosts"


def test_sample_is_generated_from_the_models():
    committed = (REPO / "inventories" / "_sample" / "cluster.yml").read_text()
    assert committed == sample.render(), "run: python -m gridready.sample > inventories/_sample/cluster.yml"


def _field_names(model: type[BaseModel], seen: set[type]) -> set[str]:
    names: set[str] = set()
    if model in seen:
        return names
    seen.add(model)
    for name, info in model.model_fields.items():
        names.add(name)
        stack = [info.annotation]
        while stack:
            ann = stack.pop()
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                names |= _field_names(ann, seen)
            stack.extend(typing.get_args(ann))
    return names


def test_sample_mentions_every_key():
    text = (REPO / "inventories" / "_sample" / "cluster.yml").read_text()
    missing = sorted(n for n in _field_names(ClusterSpec, set()) if f"{n}:" not in text)
    assert not missing
