"""Name patterns shared by the whole spec (and by anything that names a customer or a tier)."""

from __future__ import annotations

from collections.abc import Iterable

# Customer slug: the inventory directory, the Pulumi stack, the artifacts folder and the `customer` metric label
# (DESIGN.md section 2); also a tier name (systemd unit vllm-<name>, RayService <name>).
SLUG = r"^[a-z][a-z0-9-]{1,30}$"
# An Ansible group name as gridready writes it (node groups are groups in hosts.yml).
ANSIBLE_NAME = r"^[a-z_][a-z0-9_]*$"
# A Kubernetes resource quantity (apimachinery resource.Quantity: a decimal, then a binary (Ki..Ei), decimal
# (m, k, M..E) or exponent suffix), positive: what a request or a size takes.
K8S_QUANTITY = r"^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
# A container image reference, optionally pinned by digest.
IMAGE_REF = r"^[a-z0-9.\-/:_]+(@sha256:[0-9a-f]{64})?$"


def require_unique(names: Iterable[str], what: str) -> None:
    """ValueError naming every name given more than once (pydantic reports it at the list's key)."""
    seen = list(names)
    dupes = sorted({n for n in seen if seen.count(n) > 1})
    if dupes:
        raise ValueError(f"duplicate {what}: {', '.join(dupes)}")
