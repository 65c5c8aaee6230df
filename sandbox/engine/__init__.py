"""gridready's SIMULATED LLM engine (stdlib only, Python >= 3.11).

OpenAI-compatible (vLLM) or Triton HTTP endpoints whose token timing follows a profile (profile.py), with vLLM /
Triton metric names, ground-truth request records at /gridready/requests, and optional Ray cluster membership.
Run: `python3 -m sandbox.engine --help`, or copy this directory anywhere and run
`python3 <dir>` / `python3 -m <dirname>`.
"""

__all__ = ["SIMULATED_HEADER"]

SIMULATED_HEADER = "X-Gridready-Simulated"
