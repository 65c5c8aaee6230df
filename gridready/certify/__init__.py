"""Certification verdicts: pure functions of (measurements, expectations) -> GateResult."""
