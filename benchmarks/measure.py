"""Measurement helpers: percentiles, the machine description, server resource sampling.

May import: psutil (nothing from the benchmark's own modules).
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import time
from pathlib import Path

import psutil


def machine_busy_s() -> float:
    """CPU seconds spent on all cores, not idle or iowait, since boot (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    return (sum(fields[:8]) - fields[3] - fields[4]) / ticks


def foreign_load_pct(busy_s: float, ours_s: float, wall_s: float) -> float:
    """CPU used on the machine by anything but the measured processes, in % of all cores.
    Only rounds where it is low say anything about a 2-core box."""
    return round(max(0.0, busy_s - ours_s) / (max(wall_s, 1e-9) * (os.cpu_count() or 1)) * 100, 1)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    position = q * (len(sorted_values) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def distribution_ms(values: list[float]) -> dict:
    ordered = sorted(v * 1000.0 for v in values)
    if not ordered:  # e.g. LeanInteract reports no REPL time: keep the keys, no numbers
        return {"n": 0, "mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    return {
        "n": len(ordered),
        "mean": round(statistics.fmean(ordered), 3),
        "p50": round(percentile(ordered, 0.50), 3),
        "p90": round(percentile(ordered, 0.90), 3),
        "p99": round(percentile(ordered, 0.99), 3),
        "max": round(ordered[-1], 3),
    }


def machine() -> dict:
    return {
        "cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "cpu_model": _cpu_model(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


class ResourceWatch:
    """CPU seconds and peak RSS of a server process and, separately, of its REPL children."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.rss_max = 0
        self.repl_rss_max = 0
        self.children_cpu_by_pid: dict[int, float] = {}
        self._task: asyncio.Task | None = None
        self.cpu0 = self.server_cpu()
        self.repl_cpu0 = self.children_cpu()
        self.t0 = time.monotonic()
        self.busy0 = machine_busy_s()
        self.client0 = time.process_time()

    def server_cpu(self) -> float:
        t = self.process.cpu_times()
        return t.user + t.system

    def children_cpu(self) -> float:
        try:
            children = self.process.children(recursive=True)
        except psutil.Error:
            return sum(self.children_cpu_by_pid.values())
        rss = 0
        for child in children:
            try:
                t = child.cpu_times()
                self.children_cpu_by_pid[child.pid] = t.user + t.system
                rss += child.memory_info().rss
            except psutil.Error:
                pass
        self.repl_rss_max = max(self.repl_rss_max, rss)
        # Children that exited keep their last sample (a recycled worker's CPU still counts).
        return sum(self.children_cpu_by_pid.values())

    def sample(self) -> None:
        try:
            self.rss_max = max(self.rss_max, self.process.memory_info().rss)
        except psutil.Error:
            pass
        self.children_cpu()

    async def _loop(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(0.5)

    def start(self) -> None:
        self.cpu0 = self.server_cpu()
        self.repl_cpu0 = self.children_cpu()
        self.t0 = time.monotonic()
        self.busy0 = machine_busy_s()
        self.client0 = time.process_time()  # the load driver's own CPU (all its threads)
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> dict:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self.sample()
        wall = max(1e-9, time.monotonic() - self.t0)
        cpu = self.server_cpu() - self.cpu0
        repl_cpu = self.children_cpu() - self.repl_cpu0
        ours = cpu + repl_cpu + time.process_time() - self.client0
        return {
            "foreign_load_pct": foreign_load_pct(machine_busy_s() - self.busy0, ours, wall),
            "pid": self.process.pid,
            "cpu_s": round(cpu, 3),
            "cpu_percent": round(100.0 * cpu / wall, 1),
            "rss_mb_max": round(self.rss_max / 2**20, 1),
            "repl_cpu_s": round(repl_cpu, 3),
            "repl_rss_mb_max": round(self.repl_rss_max / 2**20, 1),
        }
