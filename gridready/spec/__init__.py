"""The whole `inventories/<customer>/cluster.yml` model, on the ground floor of gridready.

This package imports only the standard library, pydantic, yaml and `gridready.catalog` (which imports nothing of
gridready); every other part of gridready imports it, never the reverse (docs/architecture.md, enforced by
tests/unit/test_layers.py). One module per section of cluster.yml:

- cluster.py: ClusterSpec, NodeGroup, Nic, SoftwarePins
- certification.py: CertificationSpec (`certification:`) with fabric.py's FabricSettings (`certification.fabric`)
- serving.py: ServingSpec, Tier, Slo (`serving:`), with triton.py (`tiers[].triton`) and decision.py
  (`serving.decision`)
- router.py: RouterSpec (`serving.router`): routes, weights, fallbacks, keys and canary timing of the router
- names.py: the slug and name patterns, defined once
"""

from gridready.spec.certification import CertificationSpec, FailurePolicy, Floors, NcclSettings, Profile
from gridready.spec.cluster import ClusterSpec, Nic, NodeGroup, SoftwarePins
from gridready.spec.decision import DecisionSpec, Objective
from gridready.spec.fabric import FabricSettings
from gridready.spec.names import ANSIBLE_NAME, IMAGE_REF, SLUG
from gridready.spec.router import Route, RouterKey, RouterSpec, RouteTarget
from gridready.spec.serving import API_KEY_ENGINES, ServingSpec, Slo, Tier
from gridready.spec.triton import TritonSettings

__all__ = [
    "ANSIBLE_NAME", "API_KEY_ENGINES", "IMAGE_REF", "SLUG", "CertificationSpec", "ClusterSpec", "DecisionSpec",
    "FabricSettings",
    "FailurePolicy", "Floors", "NcclSettings", "Nic", "NodeGroup", "Objective", "Profile", "Route", "RouteTarget",
    "RouterKey", "RouterSpec", "ServingSpec", "Slo", "SoftwarePins", "Tier", "TritonSettings",
]
