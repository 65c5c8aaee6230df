"""The pipeline stages; each `run(inv, ctx)` writes and returns its stage contract (gridready/contracts.py)."""
