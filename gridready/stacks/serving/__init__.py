"""Pulumi program `gridready-serving`: per tier a RayService (Ray Serve LLM, vLLM) or a Triton workload."""
