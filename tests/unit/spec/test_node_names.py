"""A host of a Kubernetes inventory is a Node name (a DNS-1123 subdomain); what is wrong is said in one sentence."""

from __future__ import annotations

import pytest

from gridready.spec.target_rules import node_name_problem

WHY = "on Kubernetes a host is a Node name: a DNS-1123 subdomain (lower case letters, digits, '-' and '.')"


@pytest.mark.parametrize(("host", "why"), [
    ("gpu-01.rack1.example", None), ("a", None), ("GPU01", WHY), ("gpu_01", WHY), ("-gpu", WHY), ("gpu.", WHY),
    ("a" * 253, None), ("a" * 254, WHY),
])
def test_node_name_problem(host, why):
    assert node_name_problem(host) == why
