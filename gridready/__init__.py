"""gridready: take leased H100/H200 bare metal to certified, serving LLM endpoints."""

__version__ = "0.1.0"
