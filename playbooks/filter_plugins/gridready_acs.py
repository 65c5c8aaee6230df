"""gridready_acs: ACS redirection on the bridges above GPUs/NICs, from a host's `lspci -vvv` text.

The host_tuning role asserts what certification's acs gate judges, with the same parser and rule
(gridready.probe.lspci.acs_redirects), run in the controller's process.
Filter plugin API: https://docs.ansible.com/ansible/latest/dev_guide/developing_plugins.html#filter-plugins
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gridready.probe import lspci


def acs_state(text: str) -> dict[str, Any]:
    return lspci.acs_redirects(lspci.parse(text))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"gridready_acs": acs_state}
