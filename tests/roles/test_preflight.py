"""gridready_preflight: what it recorded about each converged sandbox node."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.sandbox


def test_preflight_facts_list_the_gpus(node):
    facts = json.loads(node.file("/etc/gridready/facts.d/preflight.json").content_string)
    assert facts["gpu_device_id"] == "0x2335"
    assert len(facts["gpus"]) == 8
    assert facts["os"].startswith("Debian-12")


def test_facts_directory_is_root_owned(node):
    d = node.file("/etc/gridready/facts.d")
    assert d.is_directory and d.user == "root" and d.mode == 0o755
