"""Which instruction set the native kernels are built for: the one dispatch point.

The CPU is read once per process (/proc/cpuinfo's flags on Linux; the machine name elsewhere),
and the best ISA it can run is chosen from ISAS, best first: AVX-512 (F/BW/VL/DQ, plus VNNI and
BF16 where the CPU has them), AVX2 (+FMA, F16C; AVX-VNNI where present), ARM NEON (with the
dot-product extension where present) and portable C. Each ISA is one build of the same sources
with its own compiler flags (the C files pick their SIMD paths from the compiler's macros), so a
library is never built for more than the CPU it runs on, and `EMBER_ISA` forces a lesser path
(tests run every path the machine can run against the same references).
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass
from pathlib import Path

from ember.engine.errors import EngineError


@dataclass(frozen=True)
class Isa:
    """One build target: the CPU flags it needs, its compiler flags, and optional extensions
    (CPU flag -> compiler flag) switched on when the CPU has them."""

    name: str
    machine: str  # "x86_64", "aarch64", or "" for every machine
    needs: tuple[str, ...]
    flags: tuple[str, ...]
    extras: tuple[tuple[str, str], ...] = ()

    def missing(self, machine: str, cpu_flags: frozenset[str]) -> list[str]:
        """What this CPU lacks for the ISA ([] = it runs here)."""
        if self.machine and self.machine != machine:
            return [f"an {self.machine} CPU (this one is {machine})"]
        return [f for f in self.needs if f not in cpu_flags]

    def compiler_flags(self, cpu_flags: frozenset[str]) -> tuple[str, ...]:
        return self.flags + tuple(flag for need, flag in self.extras if need in cpu_flags)


ISAS = (
    Isa(
        "avx512",
        "x86_64",
        ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx2", "fma", "f16c"),
        ("-march=x86-64-v4", "-mtune=generic"),
        (("avx512_vnni", "-mavx512vnni"), ("avx512_bf16", "-mavx512bf16")),
    ),
    Isa(
        "avx2",
        "x86_64",
        ("avx2", "fma", "f16c"),
        ("-march=x86-64-v3", "-mtune=generic"),
        (("avx_vnni", "-mavxvnni"),),
    ),
    Isa(
        "neon",
        "aarch64",
        ("asimd",),
        ("-march=armv8-a",),
        (("asimddp", "-march=armv8.2-a+dotprod"),),
    ),
    Isa("portable", "", (), ()),
)
NAMES = tuple(i.name for i in ISAS)


@dataclass(frozen=True)
class Cpu:
    machine: str  # x86_64 | aarch64 | ...
    flags: frozenset[str]
    model: str = ""  # "AMD EPYC 7763 64-Core Processor" (model name / CPU part), "" if unknown


def _machine() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


@functools.cache
def this_cpu() -> Cpu:
    """The CPU's machine name and feature flags, read once."""
    machine = _machine()
    flags: set[str] = set()
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("flags", "Features") and not flags:
                flags.update(value.split())
            elif key.strip() in ("model name", "CPU part") and not model:
                model = value.strip()
    except OSError:
        pass
    if machine == "aarch64" and not flags and platform.system() == "Darwin":
        flags.update(("asimd", "asimddp"))  # every Apple Silicon core has NEON and dotprod
    return Cpu(machine, frozenset(flags), model or platform.processor())


def runnable(cpu: Cpu | None = None) -> list[Isa]:
    """The ISAs this CPU runs, best first (portable always last)."""
    cpu = cpu or this_cpu()
    return [i for i in ISAS if not i.missing(cpu.machine, cpu.flags)]


def choose(forced: str | None = None, cpu: Cpu | None = None) -> Isa:
    """The ISA to build for: `forced` (default: the EMBER_ISA setting) if this CPU runs it,
    else the best one it runs. A forced ISA the CPU lacks raises EngineError in one line."""
    cpu = cpu or this_cpu()
    name = (forced if forced is not None else os.environ.get("EMBER_ISA", "")).strip().lower()
    here = runnable(cpu)
    if not name or name == "auto":
        return here[0]
    by_name = {i.name: i for i in ISAS}
    if name not in by_name:
        raise EngineError(f"EMBER_ISA={name}: choose one of auto, {', '.join(NAMES)}")
    lacks = by_name[name].missing(cpu.machine, cpu.flags)
    if lacks:
        raise EngineError(
            f"EMBER_ISA={name}: this CPU lacks {', '.join(lacks)} "
            f"(it runs: {', '.join(i.name for i in here)})"
        )
    return by_name[name]
