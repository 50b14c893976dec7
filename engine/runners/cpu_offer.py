"""How many CPU threads a runner should use now: what the machine offers this process
(scheduler affinity, cgroup CPU quota, physical cores) less what other programs are using.

Why: both runners split a decode step between threads that wait for each other at its end.
When another program keeps a core busy, one of those threads is descheduled for a whole time
slice and the step waits for it: llama.cpp with 2 threads on 2 cores decoded 56.7 tok/s idle
and 1.0 with one busy process, while 1 thread kept 32.7. So `threads=0` (auto) means: as many
threads as there are cores nobody else is using (at least one), measured at load and again
while replies run (ThreadGovernor), never a constant.

Other programs' use is measured from /proc/stat (all CPUs' busy time) less this process's own
CPU time (/proc/self/stat), over the time since the last sample: a busy loop reads as about
one core whatever our own threads do. Where /proc is missing (macOS, Windows) the measure
falls back to the load average less our own runnable threads.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ember.engine.errors import EngineError

# A core counts as free while other programs use less than this much of it (spare for the
# caller's Python between steps and for noise), so 2 cores with one busy loop gives 1 thread.
SPARE_CORE = 0.3
RECHECK_S = 0.5  # how often a running runner looks again


@dataclass(frozen=True)
class CpuOffer:
    """What this process may use and what others use now (cores, averaged over sample_s)."""

    affinity: int  # CPUs the scheduler lets this process run on
    quota: float | None  # cgroup CPU quota in CPUs (None: no limit)
    physical: int  # physical cores among them (hyperthreads share a core's units)
    others_busy: float  # cores other programs kept busy
    sample_s: float

    @property
    def usable(self) -> int:
        """Threads that can run at once for us: physical cores within affinity and quota."""
        cap = min(self.affinity, self.physical)
        if self.quota is not None:
            cap = min(cap, max(1, math.floor(self.quota + 1e-9)))
        return max(1, cap)

    @property
    def free(self) -> int:
        """Usable cores nobody else is using (at least 1)."""
        return max(1, min(self.usable, int(self.usable - self.others_busy + SPARE_CORE)))

    def describe(self) -> str:
        quota = "no cgroup quota" if self.quota is None else f"cgroup quota {self.quota:g} CPUs"
        return (
            f"{self.affinity} CPUs in affinity, {self.physical} physical cores, {quota}; "
            f"other programs busy on {self.others_busy:.1f} cores"
        )


def physical_cores() -> int:
    """Physical CPU cores (Linux: distinct core ids in /proc/cpuinfo), else logical ones."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return os.cpu_count() or 1
    cores: set[tuple[str, str]] = set()
    physical = core = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "physical id":
            physical = value.strip()
        elif key.strip() == "core id":
            core = value.strip()
            cores.add((physical, core))
    return len(cores) or os.cpu_count() or 1


def affinity_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cgroup_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """cgroup v2 cpu.max (or v1 cfs quota/period) of this process's group, in CPUs."""
    try:
        fields = (root / "cpu.max").read_text().split()
        if fields and fields[0] != "max":
            return int(fields[0]) / int(fields[1])
        return None
    except (OSError, ValueError, IndexError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class CpuTimes:
    """Seconds: wall clock, all CPUs' busy time, this process's CPU time."""

    wall: float
    system_busy: float
    own: float


def cpu_times() -> CpuTimes | None:
    """A snapshot from /proc (None where there is none)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        ticks = [int(f) for f in fields]
        own = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, ValueError, IndexError):
        return None
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    busy = sum(ticks[:8]) - idle  # user nice system idle iowait irq softirq steal
    own_ticks = int(own[11]) + int(own[12])  # utime, stime (fields 14, 15)
    return CpuTimes(time.monotonic(), busy / hz, own_ticks / hz)


def others_busy(before: CpuTimes, after: CpuTimes) -> float:
    """Cores other programs used between two snapshots."""
    wall = after.wall - before.wall
    if wall <= 0:
        return 0.0
    other = (after.system_busy - before.system_busy) - (after.own - before.own)
    return max(0.0, other / wall)


def measure(
    sample_s: float = 0.1, since: CpuTimes | None = None
) -> tuple[CpuOffer, CpuTimes | None]:
    """The offer now, and the snapshot it ended on (pass it back as `since` next time to
    measure over the time between, without sleeping)."""
    before = since or cpu_times()
    if before is not None and since is None:
        time.sleep(sample_s)
    after = cpu_times()
    if before is not None and after is not None:
        busy, span = others_busy(before, after), after.wall - before.wall
    else:  # no /proc: the 1-minute load average, our own threads not counted
        busy, span = max(0.0, os.getloadavg()[0] - 1.0) if hasattr(os, "getloadavg") else 0.0, 60.0
    offer = CpuOffer(affinity_cpus(), cgroup_quota(), physical_cores(), busy, span)
    return offer, after


def check_threads(threads: int) -> None:
    """EngineError for a thread count no machine setting explains (0 = auto)."""
    if threads < 0:
        raise EngineError(f"threads={threads}: must be >= 0 (0 = auto: the cores free now)")
    limit = affinity_cpus()
    if threads > 4 * limit:
        raise EngineError(
            f"threads={threads}: this process may run on {limit} CPUs; use 1-{limit}, or 0 for auto"
        )
