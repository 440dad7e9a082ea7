"""NVML as a progress source: each GPU's SM clock against its maximum,
its clock-event (throttle) reasons, and the SM utilisation of each
compute process on it, through nvidia-ml-py. A clock held below its
maximum (power cap, thermal slowdown) is the transient straggler a GPU
reports before its rank is late; the speed replayed from a recorded
trace is that clock ratio.

Every sample has a device row (process "gpuI") and a row per running
compute process ("gpuI:PID"): a rank is mapped to either."""
from __future__ import annotations

import importlib
from dataclasses import dataclass


class NvmlUnavailable(RuntimeError):
    """No NVML here (no nvidia-ml-py, no driver, no GPU); str() is one line."""


@dataclass(frozen=True)
class GpuSample:
    t_s: float
    gpu: int
    pid: int                # 0 on the device row
    process: str            # gpuI or gpuI:PID
    sm_util: int            # percent; the device's own on its row
    sm_clock_mhz: int
    max_clock_mhz: int
    throttle_reasons: int   # NVML's clocks-event reason bits

    @property
    def speed(self) -> float:
        return self.sm_clock_mhz / self.max_clock_mhz if self.max_clock_mhz else 1.0

    def row(self) -> dict:
        return {"t_s": f"{self.t_s:.6f}", "process": self.process, "gpu": self.gpu, "pid": self.pid,
                "sm_util": self.sm_util, "sm_clock_mhz": self.sm_clock_mhz, "max_clock_mhz": self.max_clock_mhz,
                "throttle_reasons": f"{self.throttle_reasons:#x}"}


class NvmlSampler:
    """Samples the GPUs `gpus` (all if None). nvml: the nvidia-ml-py
    module (pynvml), imported if not given."""

    def __init__(self, gpus=None, nvml=None):
        if nvml is None:
            try:
                nvml = importlib.import_module("pynvml")
            except ImportError:
                raise NvmlUnavailable("nvidia-ml-py is not installed (pip install nvidia-ml-py)") from None
        self.nvml = nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            raise NvmlUnavailable(f"NVML cannot start: {exc}") from None
        try:
            count = nvml.nvmlDeviceGetCount()
            wanted = list(range(count)) if gpus is None else list(gpus)
            for i in wanted:
                if not 0 <= i < count:
                    raise NvmlUnavailable(f"no GPU {i} (this machine has {count})")
            self.handles = {i: nvml.nvmlDeviceGetHandleByIndex(i) for i in wanted}
            self.max_clock = {i: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM)
                              for i, h in self.handles.items()}
        except nvml.NVMLError as exc:
            self.close()
            raise NvmlUnavailable(f"NVML: {exc}") from None
        except NvmlUnavailable:
            self.close()
            raise
        self._seen_us = dict.fromkeys(self.handles, 0)     # last process-utilisation sample read, per GPU

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass

    def _reasons(self, handle) -> int:
        read = getattr(self.nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) \
            or self.nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        return read(handle)

    def _process_util(self, gpu: int, handle) -> dict[int, int]:
        """pid -> SM utilisation over the samples NVML took since the last read."""
        try:
            samples = self.nvml.nvmlDeviceGetProcessUtilization(handle, self._seen_us[gpu])
        except self.nvml.NVMLError:       # NOT_FOUND: no sample since the last read
            return {}
        util: dict[int, int] = {}
        for s in samples:
            util[s.pid] = max(util.get(s.pid, 0), s.smUtil)
            self._seen_us[gpu] = max(self._seen_us[gpu], s.timeStamp)
        return util

    def sample(self, t_s: float) -> list[GpuSample]:
        nvml, out = self.nvml, []
        for gpu, handle in self.handles.items():
            clock = nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)
            reasons = self._reasons(handle)
            top = self.max_clock[gpu]
            out.append(GpuSample(t_s, gpu, 0, f"gpu{gpu}", nvml.nvmlDeviceGetUtilizationRates(handle).gpu,
                                 clock, top, reasons))
            util = self._process_util(gpu, handle)
            for pid in sorted({p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)}):
                out.append(GpuSample(t_s, gpu, pid, f"gpu{gpu}:{pid}", util.get(pid, 0), clock, top, reasons))
        return out
