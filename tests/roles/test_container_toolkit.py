"""gridready_container_toolkit: installed; runtimes configured only where they exist."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.sandbox


def test_toolkit_is_installed(node):
    pkg = node.package("nvidia-container-toolkit")
    assert pkg.is_installed
    assert node.package("nvidia-container-toolkit-base").version == pkg.version


def test_absent_runtimes_are_left_alone(node):
    facts = json.loads(node.file("/etc/gridready/facts.d/container_toolkit.json").content_string)
    assert facts["runtimes_configured"] == []
    assert sorted(facts["runtimes_absent"]) == ["containerd", "docker"]
    assert not node.file("/etc/docker/daemon.json").exists
