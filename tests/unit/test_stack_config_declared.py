"""Every config key the stack programs require is declared in their Pulumi.yaml, secret where gridready passes it as a
secret (issue 33: the example stack lacked a key the program requires, so `pulumi up` from stacks/ failed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gridready import pulumi as gpulumi

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("stack", ["platform", "serving"])
def test_required_keys_are_declared(stack: str) -> None:
    program = (REPO / "gridready" / "stacks" / stack / "program.py").read_text()
    required = set(re.findall(r"cfg\.require(?:_secret)?\(\"([A-Za-z]+)\"\)", program)) | {"stack"}
    declared = yaml.safe_load((REPO / "stacks" / stack / "Pulumi.yaml").read_text())["config"]
    assert required <= set(declared), required - set(declared)
    secret = {k for k, v in declared.items() if v.get("secret")}
    assert secret == set(gpulumi.SECRET_KEYS[stack])
