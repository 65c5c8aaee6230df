"""NCCL's `NCCL_DEBUG=INFO` channel lines: which transport NCCL chose for each peer connection.

Line form (NCCL's transport setup, real lines in tests/fixtures/public/nccl-debug):
`host:pid:tid [dev] NCCL INFO Channel 03/0 : 15[7] -> 6[6] [send] via NET/Socket/3` or
`... Channel 01/0 : 8[0] -> 15[7] via P2P/IPC/read`. The transport family is the text after `via` up to its first
`/` (two parts for NET: NET/IB, NET/Socket): P2P (NVLink or PCIe peer access), SHM (through host memory), NET/IB
(InfiniBand/RoCE verbs, also `NET/IBext...` plugins), NET/Socket (TCP: the silent fallback), NVLS, CollNet.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

_CHANNEL = re.compile(r"NCCL INFO Channel (\d+)/\d+ : (\d+)\[[0-9a-fx]+\] -> (\d+)\[[0-9a-fx]+\]"
                      r"(?: \[(send|receive)\])? via (\S+(?: \S+)*)\s*$")


def family(via: str) -> str:
    parts = via.split("/")
    if parts[0] == "NET" and len(parts) > 1:
        name = parts[1]
        return "NET/IB" if name.startswith("IB") else f"NET/{name}"
    return parts[0].split()[0]


def parse(text: str) -> dict[str, Any]:
    """-> {connections: n, families: {family: count}, examples: {family: first line}}."""
    fams: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for ln in text.splitlines():
        if m := _CHANNEL.search(ln):
            f = family(m.group(5))
            fams[f] += 1
            examples.setdefault(f, ln.strip()[:300])
    return {"connections": sum(fams.values()), "families": dict(fams), "examples": examples}
