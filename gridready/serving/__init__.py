"""Serving tiers: vLLM on Ray and Triton with TensorRT-LLM, on systemd hosts or Kubernetes."""
