"""The pipeline stages; each `run(inv, ctx)` returns a StageResult and writes <stage>/summary.json."""
