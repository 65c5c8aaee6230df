"""gridready_container_engine: Docker Engine from Docker's repository (the sandbox's SIMULATED mirror of it), as
Docker documents the install: the key as /etc/apt/keyrings/docker.asc, the repository signed-by it, docker-ce and
docker-ce-cli at the pinned version and held, containerd.io, docker.service running."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.sandbox


def test_docker_is_installed_at_the_pin_and_held(node):
    assert node.package("docker-ce").version.startswith("5:28.5.1-")
    assert node.package("docker-ce-cli").version == node.package("docker-ce").version
    assert node.package("containerd.io").is_installed
    held = node.run("apt-mark showhold").stdout.split()
    assert {"docker-ce", "docker-ce-cli"} <= set(held)


def test_the_repository_is_signed_by_dockers_key(node):
    sources = node.file("/etc/apt/sources.list.d/docker.sources").content_string
    assert "Signed-By: /etc/apt/keyrings/docker.asc" in sources
    assert "BEGIN PGP PUBLIC KEY BLOCK" in node.file("/etc/apt/keyrings/docker.asc").content_string


def test_dockerd_runs_and_the_role_reports(node):
    assert node.service("docker").is_running and node.service("docker").is_enabled
    facts = json.loads(node.file("/etc/gridready/facts.d/container_engine.json").content_string)
    assert facts["status"] == "installed" and facts["version"] == "28.5.1"
