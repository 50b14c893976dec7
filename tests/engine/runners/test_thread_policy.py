"""The thread policy both runners share (cpu_offer, ThreadGovernor): free cores = what this
process may use (affinity, cgroup quota, physical cores) less what other programs keep busy;
auto follows it while a runner works, a count the user gave is kept, bad counts are one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ember.engine.api import ModelFiles
from ember.engine.errors import EngineError
from ember.engine.runners import cpu_offer, thread_governor
from ember.engine.runners.cpu_offer import CpuOffer, CpuTimes, check_threads, others_busy
from ember.engine.runners.thread_governor import ThreadGovernor


def offer(others: float, affinity: int = 2, quota: float | None = None) -> CpuOffer:
    return CpuOffer(affinity, quota, physical=affinity, others_busy=others, sample_s=0.1)


def test_free_cores_follow_the_load_affinity_and_quota() -> None:
    assert offer(0.0).free == 2 and offer(0.25).free == 2  # noise leaves both cores
    assert offer(0.7).free == 1 and offer(1.0).free == 1  # one busy program: one thread
    assert offer(2.0).free == 1 and offer(9.0).free == 1  # never fewer than one
    assert offer(0.0, affinity=8, quota=1.5).free == 1  # a container of 1.5 CPUs
    assert offer(0.0, affinity=8, quota=4.0).usable == 4
    assert CpuOffer(8, None, 4, 0.0, 0.1).usable == 4  # hyperthreads: physical cores


def test_cgroup_quota(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cpu_offer.cgroup_quota(tmp_path) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cpu_offer.cgroup_quota(tmp_path) is None
    assert cpu_offer.cgroup_quota(tmp_path / "none") is None


def test_our_own_cpu_time_is_not_other_programs_load() -> None:
    before = CpuTimes(wall=10.0, system_busy=100.0, own=5.0)
    after = CpuTimes(wall=11.0, system_busy=102.0, own=6.0)  # we used 1 core of the 2 busy
    assert others_busy(before, after) == pytest.approx(1.0)


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="no /proc: load average only")
def test_a_busy_program_is_measured() -> None:
    """A child busy loop shows as other programs' load; our own spinning does not."""
    _, start = cpu_offer.measure(0.05)
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        seen = max(cpu_offer.measure(0.3)[0].others_busy for _ in range(3))
    finally:
        spin.kill()
        spin.wait()
    assert seen >= 0.2, seen  # at least a share of a core, even on a loaded machine
    assert start is not None


def test_threads_out_of_range_are_one_line() -> None:
    with pytest.raises(EngineError, match=r"^threads=-1: must be >= 0 \(0 = auto"):
        check_threads(-1)
    with pytest.raises(EngineError, match=r"^threads=100000: this process may run on \d+ CPUs"):
        check_threads(100_000)
    check_threads(0)
    check_threads(1)


def test_governor_follows_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    offers = iter([offer(0.0), offer(1.0), offer(1.0), offer(0.1)])
    monkeypatch.setattr(thread_governor, "measure", lambda **_: (next(offers), None))
    monkeypatch.setattr(thread_governor, "RECHECK_S", 0.0)
    applied: list[int] = []
    gov = ThreadGovernor(0)
    gov.attach(applied.append)
    assert gov.threads == 2 and gov.reason.startswith("auto: 2 = cores free now (2 CPUs")
    gov._next_check = 0.0
    gov.tick()  # a busy program started
    gov._next_check = 0.0
    gov.tick()  # still busy: nothing to change
    gov._next_check = 0.0
    gov.tick()  # gone
    assert applied == [2, 1, 2] and gov.changes == 2


def test_a_count_the_user_gave_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(thread_governor, "measure", lambda **_: pytest.fail("measured"))
    applied: list[int] = []
    gov = ThreadGovernor(3)
    gov.attach(applied.append)
    gov._next_check = 0.0
    gov.tick()
    assert applied == [3] and gov.reason == "threads=3 as set"


@pytest.mark.model
def test_llamacpp_runner_follows_its_governor(starter_files: ModelFiles) -> None:
    from ember.engine.runners.llamacpp.lib import lib
    from ember.engine.runners.llamacpp.runner import LlamaCppRunner

    runner = LlamaCppRunner.load(starter_files.path, digest=starter_files.digest, max_sequences=4)
    try:
        ctx = runner._ctx
        assert lib().llama_n_threads(ctx) == runner.governor.threads >= 1
        runner._set_threads(1)
        assert lib().llama_n_threads(ctx) == lib().llama_n_threads_batch(ctx) == 1
    finally:
        runner.close()
    with pytest.raises(EngineError, match="threads=-2: must be >= 0"):
        LlamaCppRunner.load(starter_files.path, threads=-2)
