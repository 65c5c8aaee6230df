"""How long Pulumi waits for a serving workload: its await logic gives Deployments and Jobs 10 minutes by default
(pulumi-kubernetes pkg/await), less than a large model's download and load or an engine build. Each workload gets
`customTimeouts` from the tier's own budget, and the same value as the annotation `pulumi.com/timeoutSeconds`
(pulumi-kubernetes #457; customTimeouts take precedence, #672), which puts it in the rendered manifest where the
offline cross-object check (gridready/serving/consistency.py) compares it with the pods' startup probes.
"""

from __future__ import annotations

import pulumi

ANNOTATION = "pulumi.com/timeoutSeconds"
MARGIN_S = 300  # image pull and scheduling on top of the model's own load budget


def seconds(load_s: int) -> int:
    return int(load_s) + MARGIN_S


def annotations(load_s: int) -> dict[str, str]:
    return {ANNOTATION: str(seconds(load_s))}


def custom(load_s: int) -> pulumi.CustomTimeouts:
    s = f"{seconds(load_s)}s"
    return pulumi.CustomTimeouts(create=s, update=s)
