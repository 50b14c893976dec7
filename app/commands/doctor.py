"""`ember doctor`: what this machine and this install can do, for bug reports and setup checks.

Platform, Python, CPU features, RAM and free disk; torch and its devices (CUDA, MPS); the
llama.cpp build (llama_print_system_info, GPU offload, mmap/mlock); Ember's paths and settings.
Every probe is guarded: a broken part shows up as an `error` entry, never as a crash.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

NAME = "doctor"
HELP = "Check this machine and install: Python, torch devices, llama.cpp build, RAM, disk, paths."
ORDER = 90

Report = dict[str, Any]
CPU_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512_bf16",
    "avx_vnni",
    "amx_tile",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def _platform() -> Report:
    import platform
    import sys

    return {
        "system": platform.system(),
        "release": platform.release(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
    }


def _cpu() -> Report:
    import os
    from pathlib import Path

    from ember.engine.runners.cpu_offer import physical_cores

    flags: set[str] = set()
    cpuinfo = Path("/proc/cpuinfo")
    model = ""
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("flags", "Features") and not flags:
                flags = set(value.split())
            elif key.strip() == "model name" and not model:
                model = value.strip()
    return {
        "model": model,
        "logical_cores": os.cpu_count(),
        "physical_cores": physical_cores(),
        "features": [f for f in CPU_FLAGS if f in flags] if flags else "unknown",
    }


def _memory() -> Report:
    import os
    import shutil
    from pathlib import Path

    from ember.paths import get_paths

    report: Report = {}
    try:
        report["ram_total_bytes"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        report["ram_available_bytes"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        report["ram_total_bytes"] = None
    target = get_paths().data_dir
    existing = next(p for p in (target, *target.parents) if p.exists() or p == Path(p.anchor))
    report["disk_free_bytes"] = shutil.disk_usage(existing).free
    report["disk_checked_at"] = str(existing)
    return report


def _torch() -> Report:
    import torch

    report: Report = {
        "version": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "cuda_available": torch.cuda.is_available(),
        "cuda_version": torch.version.cuda,
        "mps_available": bool(getattr(torch.backends, "mps", None))
        and torch.backends.mps.is_available(),
    }
    if report["cuda_available"]:
        report["cuda_devices"] = [
            {
                "name": torch.cuda.get_device_name(i),
                "memory_bytes": torch.cuda.get_device_properties(i).total_memory,
                "capability": ".".join(map(str, torch.cuda.get_device_capability(i))),
            }
            for i in range(torch.cuda.device_count())
        ]
    return report


def parse_system_info(text: str) -> dict[str, str]:
    """'CPU : SSE3 = 1 | AVX = 1 | ...' -> {'SSE3': '1', 'AVX': '1', ...} (backend names kept)."""
    features: dict[str, str] = {}
    for part in text.replace("\n", "|").split("|"):
        if ":" in part and "=" not in part.split(":", 1)[0]:
            backend, _, part = part.partition(":")
            features.setdefault("backends", "")
            features["backends"] = ",".join(filter(None, [features["backends"], backend.strip()]))
        key, sep, value = part.partition("=")
        if sep and key.strip():
            features[key.strip()] = value.strip()
    return features


def _llama_cpp() -> Report:
    import llama_cpp

    from ember.engine.runners.llamacpp.lib import amx_build, lib

    llama = lib()
    info = llama.llama_print_system_info().decode("utf-8", "replace").strip()
    return {
        "version": llama_cpp.__version__,
        # an AMX build's extra weight buffers stay off in Ember's runner (lib.py: amx_build)
        "extra_weight_buffers": "off (AMX build)" if amx_build(info) else "on",
        "gpu_offload": bool(llama.llama_supports_gpu_offload()),
        "mmap": bool(llama.llama_supports_mmap()),
        "mlock": bool(llama.llama_supports_mlock()),
        "max_devices": int(llama.llama_max_devices()),
        "max_parallel_sequences": int(llama.llama_max_parallel_sequences()),
        "system_info": info,
        "features": parse_system_info(info),
    }


def _ember() -> Report:
    from ember import __version__
    from ember.app.config import load_settings
    from ember.errors import EmberError
    from ember.paths import get_paths

    paths = get_paths()
    report: Report = {
        "version": __version__,
        "config_dir": str(paths.config_dir),
        "data_dir": str(paths.data_dir),
        "cache_dir": str(paths.cache_dir),
        "models_dir": str(paths.models_dir),
        "config_file": str(paths.config_file),
        "config_file_exists": paths.config_file.exists(),
    }
    try:
        settings = load_settings(paths)
        report["settings"] = {
            "model": settings.model,
            "runner": settings.runner,
            "device": settings.device,
        }
    except EmberError as exc:
        report["settings_error"] = str(exc)
    return report


def _auto() -> Report:
    """What auto picks on this machine now, and why: the runner for the default model, the
    thread count (cpu_offer: affinity, cgroup quota, other programs' load) and the native
    kernels' ISA."""
    from ember.engine.errors import EngineError
    from ember.engine.runners.thread_governor import auto_threads
    from ember.engine.runners.torch.native.isa import choose, runnable

    threads, why = auto_threads()
    report: Report = {"threads": threads, "threads_why": why}
    try:
        report.update(_auto_runner())
    except Exception as exc:  # noqa: BLE001 - doctor reports, never stops
        report["runner_error"] = str(exc)
    report["native_isas_here"] = [i.name for i in runnable()]
    try:
        report["native_isa"] = choose().name
    except EngineError as exc:
        report["native_isa_error"] = str(exc)
    return report


def _auto_runner() -> Report:
    """The runner the default model gets and why: as set, the only one that fits, or the
    measured faster one (engine/runners/runner_choice.py). Reads the cache; measures nothing."""
    import time

    from ember.app.config import load_settings
    from ember.app.loading import resolve_files
    from ember.app.options import engine_options
    from ember.engine.runners.factory import MEASURED, pick_runner
    from ember.engine.runners.runner_choice import ChoiceCache, lookup
    from ember.paths import get_paths

    settings = load_settings(get_paths())
    name = settings.model or "gemma3-270m"
    options = engine_options(name, settings)
    report: Report = {"default_model": name}
    if options.runner != "auto":
        return {**report, "runner": options.runner, "runner_why": "as set (runner setting)"}
    model = resolve_files(name)
    runner = pick_runner(options, model.format)
    if runner != MEASURED:
        why = "a safetensors model, an accelerator, or no llama-cpp-python: only torch runs it"
        return {**report, "runner": runner, "runner_why": why}
    choice = lookup(options, model)
    if choice is None:
        report["runner"] = "not measured yet"
        report["runner_why"] = (
            f"the first load of {name} times llama.cpp and torch decoding it (a few seconds) "
            "and keeps the faster"
        )
    else:
        report["runner"], report["runner_why"] = choice.runner, choice.reason
        if choice.decode_tok_s:
            report["decode_tok_s"] = {k: round(v, 1) for k, v in choice.decode_tok_s.items()}
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(choice.measured_at))
            report["measured"] = f"{when}, choosing took {choice.cost_s:.1f} s"
    report["runner_choice_cache"] = str(ChoiceCache(options.runner_choice_dir).path or "off")
    return report


PROBES: dict[str, Callable[[], Report]] = {
    "platform": _platform,
    "cpu": _cpu,
    "memory": _memory,
    "torch": _torch,
    "llama_cpp": _llama_cpp,
    "ember": _ember,
    "auto": _auto,
}


def collect() -> dict[str, Report]:
    """Every section; a probe that fails reports {'error': reason}."""
    report: dict[str, Report] = {}
    for name, probe in PROBES.items():
        try:
            report[name] = probe()
        except Exception as exc:  # noqa: BLE001 - doctor must finish to be useful
            report[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return report


def _human(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def render(report: dict[str, Report]) -> str:
    """Sections of 'key: value' lines (byte counts in MB/GB, the raw system info last)."""
    from ember.app.commands._model_format import human_bytes

    lines: list[str] = []
    for section, values in report.items():
        lines.append(f"{section}:")
        for key, value in values.items():
            if key in ("system_info", "features") and section == "llama_cpp":
                continue
            shown = human_bytes(value) if key.endswith("_bytes") and value else _human(value)
            lines.append(f"  {key}: {shown}")
    info = report.get("llama_cpp", {}).get("system_info")
    if info:
        lines += ["llama.cpp build:", f"  {info}"]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    report = collect()
    if args.json:
        from ember.app.commands._model_format import print_json

        print_json(report)
    else:
        print(render(report))
    return 0
