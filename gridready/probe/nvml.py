"""NVML through pynvml, when importable: per-GPU PCIe link (current and max), NVLink state and error counters."""

from __future__ import annotations

from typing import Any

try:
    import pynvml
except ImportError:  # the probe then relies on nvidia-smi alone
    pynvml = None


def available() -> bool:
    if pynvml is None:
        return False
    try:
        pynvml.nvmlInit()
        return True
    except Exception:
        return False


def _try(fn: Any, *args: Any) -> Any:
    try:
        v = fn(*args)
        return v.decode() if isinstance(v, bytes) else v
    except Exception:
        return None


_NVLINK_COUNTERS = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}


def collect() -> dict[str, Any]:
    """-> {driver_version, gpus: [{index, bus_id, device_id, pcie: {...}, nvlink: {links: {n: {active,
    errors}}}}]}. Call after available()."""
    assert pynvml is not None
    out: dict[str, Any] = {"driver_version": _try(pynvml.nvmlSystemGetDriverVersion), "gpus": []}
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        pci = _try(pynvml.nvmlDeviceGetPciInfo, h)
        g: dict[str, Any] = {
            "index": i,
            "name": _try(pynvml.nvmlDeviceGetName, h),
            "bus_id": (pci.busId.decode() if isinstance(pci.busId, bytes) else pci.busId) if pci else None,
            "device_id": f"0x{pci.pciDeviceId:08X}" if pci else None,
            "pcie": pcie(i),
            "nvlink": {"links": {}},
        }
        for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
            state = _try(pynvml.nvmlDeviceGetNvLinkState, h, link)
            if state is None:
                continue
            errs = {k: _try(pynvml.nvmlDeviceGetNvLinkErrorCounter, h, link, c) for k, c in _NVLINK_COUNTERS.items()}
            g["nvlink"]["links"][str(link)] = {"active": bool(state), "errors": errs}
        out["gpus"].append(g)
    return out


def pcie(index: int) -> dict[str, Any]:
    """Current and max PCIe gen/width of GPU `index` right now (call it under load: gen drops at idle)."""
    assert pynvml is not None
    h = pynvml.nvmlDeviceGetHandleByIndex(index)
    return {
        "gen_current": _try(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
        "gen_max": _try(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
        "gen_device_max": _try(getattr(pynvml, "nvmlDeviceGetGpuMaxPcieLinkGeneration", lambda _h: None), h),
        "width_current": _try(pynvml.nvmlDeviceGetCurrPcieLinkWidth, h),
        "width_max": _try(pynvml.nvmlDeviceGetMaxPcieLinkWidth, h),
        "source": "nvml",
    }
