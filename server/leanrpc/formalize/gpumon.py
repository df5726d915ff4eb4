"""Peak VRAM and GPU utilisation from NVML, sampled in a thread while a run goes on.

Job: `GpuMonitor` samples `nvmlDeviceGetMemoryInfo().used` and
`nvmlDeviceGetUtilizationRates().gpu` of one device every `interval_s` between
`start()` and `stop()`, and reports peak memory used, mean and max utilisation.
NVML (nvidia-ml-py, NVIDIA's own bindings) is the only source of utilisation;
torch's allocator counters are reported beside it (`torch_max_allocated_bytes`)
because NVML's "used" includes other processes and the CUDA context.

Without a GPU (no nvidia-ml-py, no driver, no device) the report is
`{"available": False, "reason": …}` and the figures are None, never 0.

Imports: nothing of leanrpc; pynvml (nvidia-ml-py) and torch lazily.
"""

from __future__ import annotations

import threading
from typing import Any


class GpuMonitor:
    def __init__(self, device_index: int = 0, interval_s: float = 0.1) -> None:
        self.device_index = device_index
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handle = None
        self._nvml = None
        self.reason = ""
        self.samples_used: list[int] = []
        self.samples_util: list[int] = []
        self.report: dict[str, Any] | None = None

    def start(self) -> "GpuMonitor":
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.device_index)
            self._nvml = pynvml
        except Exception as exc:  # no module, no driver, no device: all mean "no GPU here"
            self.reason = f"no NVML GPU: {type(exc).__name__}: {exc}"
            return self
        self._thread = threading.Thread(target=self._run, name="gpumon", daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        nv = self._nvml
        self.samples_used.append(int(nv.nvmlDeviceGetMemoryInfo(self._handle).used))
        self.samples_util.append(int(nv.nvmlDeviceGetUtilizationRates(self._handle).gpu))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval_s)

    def stop(self) -> dict[str, Any]:
        if self._thread is None:
            return {
                "available": False,
                "reason": self.reason or "not started",
                "peak_vram_bytes": None,
                "gpu_util_percent": None,
            }
        self._stop.set()
        self._thread.join()
        self._sample()
        name = self._nvml.nvmlDeviceGetName(self._handle)
        self._nvml.nvmlShutdown()
        report: dict[str, Any] = {
            "available": True,
            "device": name if isinstance(name, str) else name.decode(),
            "peak_vram_bytes": max(self.samples_used),
            "gpu_util_percent": round(sum(self.samples_util) / len(self.samples_util), 1),
            "gpu_util_max_percent": max(self.samples_util),
            "samples": len(self.samples_util),
        }
        try:
            import torch

            if torch.cuda.is_available():
                report["torch_max_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
        except ImportError:
            pass
        return report

    def __enter__(self) -> "GpuMonitor":
        return self.start()

    def __exit__(self, *exc) -> None:
        if not self._stop.is_set():
            self.report = self.stop()
