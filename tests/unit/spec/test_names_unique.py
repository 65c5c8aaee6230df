"""Duplicate names in a spec list: every name given more than once named once, sorted, after what they are."""

from __future__ import annotations

import pytest

from gridready.spec.names import require_unique


def test_unique_names_pass():
    require_unique(iter(["a", "b", "c"]), "tier names")  # a generator is read once
    require_unique([], "tier names")


@pytest.mark.parametrize(("names", "message"), [
    (["b", "a", "b"], "duplicate NIC names: b"),
    (["c", "a", "c", "a", "a", "d"], "duplicate NIC names: a, c"),
])
def test_duplicates_named(names, message):
    with pytest.raises(ValueError) as err:
        require_unique(iter(names), "NIC names")
    assert str(err.value) == message
