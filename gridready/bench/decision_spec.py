"""The decision settings live with the serving spec (cluster.yml `serving.decision`); re-exported here."""

from gridready.serving.decision_spec import DecisionSpec, Objective

__all__ = ["DecisionSpec", "Objective"]
