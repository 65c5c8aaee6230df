"""The one-line errors an operator reads for a cluster.yml value (inventory.pydantic_lines), for spec model tests."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from gridready.inventory import pydantic_lines


def lines(model: type[BaseModel], data: dict[str, Any]) -> list[str]:
    """`cluster.yml: <key>: <message>` per error of `data` validated as `model`; [] when it is accepted."""
    try:
        model.model_validate(data)
    except ValidationError as err:
        return pydantic_lines("cluster.yml", err)
    return []
