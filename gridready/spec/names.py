"""Name patterns shared by the whole spec (and by anything that names a customer or a tier)."""

from __future__ import annotations

# Customer slug: the inventory directory, the Pulumi stack, the artifacts folder and the `customer` metric label
# (DESIGN.md section 2); also a tier name (systemd unit vllm-<name>, RayService <name>).
SLUG = r"^[a-z][a-z0-9-]{1,30}$"
# An Ansible group name as gridready writes it (node groups are groups in hosts.yml).
ANSIBLE_NAME = r"^[a-z_][a-z0-9_]*$"
# A container image reference, optionally pinned by digest.
IMAGE_REF = r"^[a-z0-9.\-/:_]+(@sha256:[0-9a-f]{64})?$"
