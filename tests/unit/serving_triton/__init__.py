"""Triton / TensorRT-LLM tier: repositories, wiring, engine cache, Kubernetes component."""
