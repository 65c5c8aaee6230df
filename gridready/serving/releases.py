"""The serving pins against the upstream release lists recorded in gridready/data/releases.yml.

`code_pins()` collects the pins gridready's own modules hold; the caller adds those kept elsewhere (the platform
stack's LWS chart, the weights role's huggingface_hub). `problems()` names each pin missing from its component's
list; `behind()` names each pin older than the newest release recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gridready.serving.sglang.versions import pin as sglang_pin
from gridready.spec.serving import KUBERAY_VERSION, RAY_VERSION, VLLM_VERSION, KubernetesServing

DATA = Path(__file__).resolve().parent.parent / "data" / "releases.yml"


def recorded() -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = yaml.safe_load(DATA.read_text())
    return data


def code_pins() -> dict[str, str]:
    return {
        "vllm": VLLM_VERSION,
        "ray": RAY_VERSION,
        "kuberay": KUBERAY_VERSION,
        "gpu_operator": str(KubernetesServing.model_fields["gpu_operator_version"].default),
        "sglang": sglang_pin().version,
    }


def problems(pins: dict[str, str], lists: dict[str, dict[str, Any]] | None = None) -> list[str]:
    lists = recorded() if lists is None else lists
    out = []
    for component, version in sorted(pins.items()):
        entry = lists.get(component)
        if entry is None:
            out.append(f"{DATA.name}: {component}: no release list recorded for the pin {version}")
        elif version not in entry["versions"]:
            out.append(f"{DATA.name}: {component}: pin {version} is not a release in {entry['source']} "
                       f"(recorded {entry['recorded']}: {', '.join(entry['versions'])})")
    return out


def behind(pins: dict[str, str], lists: dict[str, dict[str, Any]] | None = None) -> dict[str, str]:
    """component -> newest recorded release, for the pins older than it."""
    lists = recorded() if lists is None else lists
    return {c: lists[c]["versions"][0] for c, v in pins.items()
            if c in lists and v in lists[c]["versions"] and lists[c]["versions"][0] != v}
