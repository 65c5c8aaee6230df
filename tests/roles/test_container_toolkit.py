"""gridready_container_toolkit: installed; runtimes configured only where they exist (provision installs Docker
Engine first, gridready_container_engine, whose containerd.io ships containerd: both are there)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.sandbox


def test_toolkit_is_installed(node):
    pkg = node.package("nvidia-container-toolkit")
    assert pkg.is_installed
    assert node.package("nvidia-container-toolkit-base").version == pkg.version


def test_installed_runtimes_are_configured(node):
    facts = json.loads(node.file("/etc/gridready/facts.d/container_toolkit.json").content_string)
    assert sorted(facts["runtimes_configured"]) == ["containerd", "docker"]
    assert facts["runtimes_absent"] == []
    # nvidia-ctk runtime configure --runtime=docker: runtimes.nvidia in daemon.json, which dockerd reads at start
    daemon = json.loads(node.file("/etc/docker/daemon.json").content_string)
    assert daemon["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    assert "nvidia" in node.run("docker version").stdout
