"""A stand-in for pynvml (nvidia-ml-py) with the calls gridready.probe.nvml makes, answering from a table of GPUs.

Names, arguments and return shapes as pynvml documents them (https://pypi.org/project/nvidia-ml-py/, pynvml.py, and
the NVML API reference https://docs.nvidia.com/deploy/nvml-api/): a failed call raises `NVMLError` (one subclass per
NVML return code, e.g. `NVMLError_NotSupported` for NVML_ERROR_NOT_SUPPORTED = 3); `nvmlDeviceGetPciInfo` returns a
struct with `busId` (bytes in older releases, str in newer ones) and `pciDeviceId` (the 32-bit device/vendor id,
0x233010DE for an H100 SXM); `nvmlDeviceGetNvLinkState(handle, link)` returns NVML_FEATURE_ENABLED (1) or
NVML_FEATURE_DISABLED (0) and raises for a link the GPU does not have; `nvmlDeviceGetNvLinkErrorCounter(handle, link,
counter)` takes NVML_NVLINK_ERROR_DL_REPLAY (0), DL_RECOVERY (1), DL_CRC_FLIT (2), DL_CRC_DATA (3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_LIBRARY_NOT_FOUND = 12


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


class NVMLError_Uninitialized(NVMLError):  # noqa: N801 (pynvml's own class names)
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_UNINITIALIZED)


class NVMLError_InvalidArgument(NVMLError):  # noqa: N801
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_INVALID_ARGUMENT)


class NVMLError_NotSupported(NVMLError):  # noqa: N801
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_NOT_SUPPORTED)


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_LIBRARY_NOT_FOUND)


@dataclass
class PciInfo:
    """The fields of c_nvmlPciInfo_t the probe reads."""

    busId: Any  # noqa: N815 (NVML's field name)
    pciDeviceId: int  # noqa: N815


@dataclass
class Gpu:
    """One GPU's answers; None for a call that raises NVMLError_NotSupported on it."""

    name: Any = "NVIDIA H100 80GB HBM3"
    pci: PciInfo | None = None
    gen: tuple[int | None, int | None, int | None] = (5, 5, 5)  # current, max (link), GPU max
    width: tuple[int | None, int | None] = (16, 16)
    links: dict[int, int] = field(default_factory=dict)  # link -> NVML_FEATURE_ENABLED/DISABLED
    counters: dict[tuple[int, int], int] = field(default_factory=dict)  # (link, counter) -> count


def _answer(v: Any) -> Any:
    if v is None:
        raise NVMLError_NotSupported()
    return v


class FakeNvml:
    """The module object: `nvml.pynvml = FakeNvml(gpus)`. `calls` records (function, args) in order."""

    def __init__(self, gpus: list[Gpu], driver: Any = "560.35.03", init_error: NVMLError | None = None,
                 max_links: int | None = 18, gpu_max_gen: bool = True) -> None:
        self.gpus, self.driver, self.init_error = gpus, driver, init_error
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.initialized = False
        if max_links is not None:  # pynvml >= 11 defines it (18 since NVML 11.0); older ones do not
            self.NVML_NVLINK_MAX_LINKS = max_links
        if gpu_max_gen:  # added in NVML 11.x (nvmlDeviceGetGpuMaxPcieLinkGeneration); absent in older pynvml
            self.nvmlDeviceGetGpuMaxPcieLinkGeneration = self._gpu_max_gen

    def _dev(self, name: str, handle: int, *args: Any) -> Gpu:
        self.calls.append((name, (handle, *args)))
        if not self.initialized:
            raise NVMLError_Uninitialized()
        return self.gpus[handle]

    def nvmlInit(self) -> None:  # noqa: N802 (pynvml's names)
        self.calls.append(("nvmlInit", ()))
        if self.init_error is not None:
            raise self.init_error
        self.initialized = True

    def nvmlSystemGetDriverVersion(self) -> Any:  # noqa: N802
        self.calls.append(("nvmlSystemGetDriverVersion", ()))
        return _answer(self.driver)

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        self.calls.append(("nvmlDeviceGetCount", ()))
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        self.calls.append(("nvmlDeviceGetHandleByIndex", (index,)))
        if not 0 <= index < len(self.gpus):
            raise NVMLError_InvalidArgument()
        return index  # an opaque handle; the fake's is the index

    def nvmlDeviceGetName(self, h: int) -> Any:  # noqa: N802
        return _answer(self._dev("nvmlDeviceGetName", h).name)

    def nvmlDeviceGetPciInfo(self, h: int) -> PciInfo:  # noqa: N802
        return _answer(self._dev("nvmlDeviceGetPciInfo", h).pci)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:  # noqa: N802
        return _answer(self._dev("nvmlDeviceGetCurrPcieLinkGeneration", h).gen[0])

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:  # noqa: N802
        return _answer(self._dev("nvmlDeviceGetMaxPcieLinkGeneration", h).gen[1])

    def _gpu_max_gen(self, h: int) -> int:
        return _answer(self._dev("nvmlDeviceGetGpuMaxPcieLinkGeneration", h).gen[2])

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:  # noqa: N802
        return _answer(self._dev("nvmlDeviceGetCurrPcieLinkWidth", h).width[0])

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:  # noqa: N802
        return _answer(self._dev("nvmlDeviceGetMaxPcieLinkWidth", h).width[1])

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:  # noqa: N802
        g = self._dev("nvmlDeviceGetNvLinkState", h, link)
        if link not in g.links:
            raise NVMLError_NotSupported()
        return g.links[link]

    def nvmlDeviceGetNvLinkErrorCounter(self, h: int, link: int, counter: int) -> int:  # noqa: N802
        g = self._dev("nvmlDeviceGetNvLinkErrorCounter", h, link, counter)
        if link not in g.links or not 0 <= counter <= 3:
            raise NVMLError_InvalidArgument()
        return g.counters.get((link, counter), 0)
