"""Ensemble wiring check: every step input is produced by the request or an earlier step.

Works on parsed `inference.ModelConfig` messages, so it checks what Triton will actually load.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gridready.serving.triton.pbtxt import RepositoryError


def check_ensemble(ensemble: Any, models: Mapping[str, Any]) -> None:
    """Raise RepositoryError listing every wiring problem of `ensemble` against the step `models`."""
    problems: list[str] = []
    src = f"{ensemble.name}/config.pbtxt"
    request = {t.name: t for t in ensemble.input}
    produced: dict[str, tuple[str, int]] = {}  # ensemble tensor -> (step model, data_type)
    for n, step in enumerate(ensemble.ensemble_scheduling.step, start=1):
        where = f"{src}: step {n} ({step.model_name})"
        model = models.get(step.model_name)
        if model is None:
            problems.append(f"{where}: no model {step.model_name!r} in the repository")
            continue
        inputs = {t.name: t for t in model.input}
        outputs = {t.name: t for t in model.output}
        for key, value in step.input_map.items():
            if key not in inputs:
                problems.append(f"{where}: input_map key {key!r} is not an input of {step.model_name}")
                continue
            if value in request:
                dtype = request[value].data_type
            elif value in produced:
                dtype = produced[value][1]
            else:
                problems.append(
                    f"{where}: input {key!r} reads {value!r}, which neither the request nor an earlier step produces"
                )
                continue
            if dtype != inputs[key].data_type:
                problems.append(f"{where}: input {key!r} has another data type than {value!r}")
        mapped = set(step.input_map)
        for name, tensor in inputs.items():
            if not tensor.optional and name not in mapped:
                problems.append(f"{where}: required input {name!r} is not mapped")
        for key, value in step.output_map.items():
            if key not in outputs:
                problems.append(f"{where}: output_map key {key!r} is not an output of {step.model_name}")
                continue
            if value in produced or value in request:
                problems.append(f"{where}: tensor {value!r} is produced twice")
                continue
            produced[value] = (step.model_name, outputs[key].data_type)
    for out in ensemble.output:
        if out.name not in produced:
            problems.append(f"{src}: ensemble output {out.name!r} is produced by no step")
    if problems:
        raise RepositoryError(problems)
