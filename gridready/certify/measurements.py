"""Read views over a probe document (gridready.probe/1): one merged record per GPU, whatever the source.

nvidia-smi `--query-gpu` gives the index and bus id; `-q` the counters; NVML the links; the torch benchmarks the
PCIe link sampled under load. Missing pieces stay None so that the gates can fail closed.
"""

from __future__ import annotations

from typing import Any


def _bus(bus: str | None) -> str | None:
    """00000000:19:00.0 / 0000:19:00.0 / 19:00.0 -> 0000:19:00.0 (lower case)."""
    if not bus:
        return None
    b = bus.strip().lower()
    parts = b.split(":")
    if len(parts) == 3:
        return f"{parts[0][-4:]}:{parts[1]}:{parts[2]}"
    if len(parts) == 2:
        return f"0000:{b}"
    return b


def gpus(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """[{index, bus_id, name, device_id, query, q, nvml, torch, sysfs}] ordered by index."""
    smi = doc.get("nvidia_smi") or {}
    query = smi.get("query") or []
    q_gpus = (smi.get("q") or {}).get("gpus") or []
    nvml_gpus = (doc.get("nvml") or {}).get("gpus") or []
    torch_gpus = (doc.get("torch") or {}).get("gpus") or []
    eps = {e["bdf"]: e for e in (doc.get("system") or {}).get("pcie_endpoints") or [] if e.get("kind") == "gpu"}
    # only GPUs with a bus id join by it: rows without one would all meet the last of them under None
    by_bus_q = {b: g for g in q_gpus if (b := _bus(g.get("bus_id")))}
    by_bus_nvml = {b: g for g in nvml_gpus if (b := _bus(g.get("bus_id")))}
    rows: list[dict[str, Any]] = []
    if query:
        base = [(int(r["index"]), _bus(str(r.get("pci.bus_id") or "")), r) for r in query
                if isinstance(r.get("index"), int)]
    elif q_gpus:
        base = [(i, _bus(g.get("bus_id")), {}) for i, g in enumerate(q_gpus)]
    else:
        base = [(int(g["index"]), _bus(g.get("bus_id")), {}) for g in nvml_gpus]
    for idx, bus, qrow in sorted(base, key=lambda t: t[0]):
        q = by_bus_q.get(bus) or (q_gpus[idx] if not query and idx < len(q_gpus) else {})
        nv = by_bus_nvml.get(bus) or {}
        tg: dict[str, Any] = next((t for t in torch_gpus if t.get("index") == idx), {})
        dev = qrow.get("pci.device_id") or q.get("device_id") or nv.get("device_id")
        rows.append({"index": idx, "bus_id": bus, "name": qrow.get("name") or q.get("name") or nv.get("name"),
                     "device_id": str(dev) if dev else None, "query": qrow, "q": q, "nvml": nv, "torch": tg,
                     "sysfs": eps.get(bus)})
    return rows


def gpu_label(g: dict[str, Any]) -> str:
    return f"GPU {g['index']} ({g['bus_id']})" if g.get("bus_id") else f"GPU {g['index']}"


def left_out(doc: dict[str, Any], measured: set[int], expected_gpus: int) -> list[tuple[int, str]]:
    """(index, label) of every GPU nvidia-smi lists or the inventory expects (indices 0..n-1) that a per-GPU
    measurement left out: a GPU CUDA did not enumerate (failed to initialise, hidden by CUDA_VISIBLE_DEVICES) is
    judged, never skipped."""
    listed = {g["index"]: gpu_label(g) for g in gpus(doc)}
    for i in range(expected_gpus):
        listed.setdefault(i, f"GPU {i}")
    return [(i, label) for i, label in sorted(listed.items()) if i not in measured]


def after_load(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The probe's health snapshot taken after its load phases, as a document `gpus()` reads (its nvidia-smi and
    kernel log over the idle ones); None for a probe that took none (older probes, offline captures)."""
    after = doc.get("after")
    if not isinstance(after, dict):
        return None
    return {**doc, "nvidia_smi": after.get("nvidia_smi"), "kernel_log": after.get("kernel_log")}


def later_rows(doc: dict[str, Any]) -> dict[str | None, dict[str, Any]] | None:
    """The GPUs after the load by bus id; None without that snapshot."""
    after = after_load(doc)
    return by_bus(gpus(after)) if after else None


def by_bus(rows: list[dict[str, Any]]) -> dict[str | None, dict[str, Any]]:
    return {g["bus_id"]: g for g in rows}
