"""The measured kernel choice (native/choice.py): decisions follow what was measured (a fake
clock), the fits are cached per machine, thread count, type and columns, and a real runner
writes the file on its first prompt and reads it on the next load instead of measuring."""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ember.engine.runners.base import ForwardBatch, SeqStep
from ember.engine.runners.torch.native import choice as native_choice
from ember.engine.runners.torch.native import structs as S
from ember.engine.runners.torch.native.choice import FOREVER, KernelChoice
from ember.engine.runners.torch.native.isa import this_cpu
from ember.engine.runners.torch.native.kernels import native_build
from ember.engine.runners.torch.runner import TorchOptions, TorchRunner
from tests.conftest import TEST_CACHE

# microseconds per weight row: fixed + per token (dots win below 8 rows, dense above 180)
COSTS = {
    "dots": (0.1, 1.0),
    "gemm": (4.0, 0.5),  # the tiled matmul at a few rows, on small slices (the crossover)
    "native": (4.0, 0.5),  # the same kernels at prompt sizes, on large slices
    "dense": (40.0, 0.3),
    "bf16": (20.0, 0.1),
}


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a new process: no fits held in memory."""
    monkeypatch.setattr(native_choice, "_MEASURED", {})


class FakeMachine:
    """A clock that only the products move, by COSTS (or flat ones: a stalled machine)."""

    def __init__(self, costs: dict[str, tuple[float, float]] = COSTS) -> None:
        self.now, self.calls, self.costs = 0.0, 0, costs

    def clock(self) -> float:
        return self.now

    def run(self, path: str, part: S.EmMat, tokens: int) -> None:
        fixed, per = self.costs[path]
        self.now += part.rows * (fixed + per * tokens) * 1e-6
        self.calls += 1


def linear(*parts: tuple[int, int, int]) -> S.EmLinear:
    """An em_linear of (type, rows, cols) parts (no data: the fake machine needs none)."""
    desc = S.EmLinear()
    for i, (qtype, rows, cols) in enumerate(parts):
        desc.part[i] = S.EmMat(None, 0, qtype, rows, cols, 0)
    desc.n_parts, desc.out_features = len(parts), sum(p[1] for p in parts)
    return desc


def chooser(
    path: Path | None, fake: FakeMachine, threads: int = 2, bf16: bool = False
) -> KernelChoice:
    return KernelChoice(
        path, "Test CPU|avx2|avx2 fma", fake.run, lambda: threads, fake.clock, bf16=bf16
    )


def test_decisions_follow_the_measurements(tmp_path: Path) -> None:
    fake = FakeMachine()
    choice = chooser(tmp_path / "choice.json", fake)
    qkv = linear((S.Q4_K, 2048, 2048), (S.Q4_K, 512, 2048), (S.Q6_K, 512, 2048))
    assert choice.gemm_min_rows([qkv]) == 8  # 0.1 + m > 4 + m / 2 from m = 8
    # 4 + m / 2 < 40 + 3 m / 10 below 180 rows (at 180 a tie, decided by float rounding)
    assert choice.prefill_path(qkv, 64) == choice.prefill_path(qkv, 179) == "native"
    assert choice.prefill_path(qkv, 181) == choice.prefill_path(qkv, 2048) == "dense"
    assert "bf16" not in choice.part_fits(qkv.part[0])  # no bfloat16 hardware: not measured
    fit = choice.part_fits(qkv.part[0])["gemm"]
    assert fit.fixed == pytest.approx(4e-6) and fit.per_token == pytest.approx(0.5e-6)


def test_prompts_and_steps_are_judged_on_their_own_slices(tmp_path: Path) -> None:
    """The tiled matmul at a few rows (the decode crossover) is timed on 256-row slices, at
    prompt sizes on 2048 rows like the torch paths: each decision reads its own measurement."""
    seen: dict[str, set[int]] = {}

    class Recording(FakeMachine):
        def run(self, path: str, part: S.EmMat, tokens: int) -> None:
            seen.setdefault(path, set()).add(int(part.rows))
            super().run(path, part, tokens)

    fake = Recording({**COSTS, "native": (40.0, 0.5)})  # whole matrices: dearer than slices
    choice = chooser(tmp_path / "choice.json", fake)
    down = linear((S.Q4_K, 3072, 8192))
    assert choice.gemm_min_rows([down]) == 8  # from "gemm", as before
    assert choice.prefill_path(down, 64) == "dense"  # 40 + 19.2 < 40 + 32
    assert seen == {"dots": {256}, "gemm": {256}, "native": {2048}, "dense": {2048}}


def test_bf16_is_a_choice_where_the_cpu_has_it(tmp_path: Path) -> None:
    """With bfloat16 hardware the bf16 path is measured too, cached under its own key (a file
    written without it is not read for it), and taken where it measured cheapest."""
    path = tmp_path / "choice.json"
    fake = FakeMachine()
    down = linear((S.Q6_K, 2048, 8192))
    plain = chooser(path, fake).prefill_path(down, 4096)
    assert plain == "dense"
    choice = chooser(path, fake, bf16=True)
    # 4 + m / 2 < 20 + m / 10 below 40 rows; 20 + m / 10 < 40 + 3 m / 10 always
    assert choice.prefill_path(down, 39) == "native" and choice.prefill_path(down, 41) == "bf16"
    assert choice.prefill_path(down, 4096) == "bf16"
    fits = json.loads(path.read_text())["fits"]
    key = f"Test CPU|avx2|avx2 fma|t2|q{S.Q6_K}|c8192"
    assert set(fits) == {key, f"{key}|bf16"}
    assert set(fits[f"{key}|bf16"]) == {"dots", "gemm", "native", "dense", "bf16"}
    # a float16 part keeps its 11-bit mantissas: never bfloat16, however cheap
    assert choice.prefill_path(linear((S.Q6_K, 2048, 8192), (S.F16, 64, 8192)), 4096) == "dense"
    # nor Q8_0, whose 127 codes bfloat16 moves by up to a quarter step
    assert choice.prefill_path(linear((S.Q8_0, 2048, 8192)), 4096) == "dense"


def test_bf16_is_offered_with_the_hardware_under_the_builds_that_go_with_it() -> None:
    """An AMX Xeon forced to the avx2 build (EMBER_ISA) runs as an AVX2 machine would: no bf16."""
    assert native_choice.offers_bf16("avx512", {"avx512f", "amx_bf16"})
    assert native_choice.offers_bf16("avx512", {"avx512_bf16"})
    assert native_choice.offers_bf16("neon", {"asimd", "bf16"})
    assert not native_choice.offers_bf16("avx512", {"avx512f", "avx512_vnni"})
    assert not native_choice.offers_bf16("avx2", {"avx2", "amx_bf16", "avx512_bf16"})
    assert not native_choice.offers_bf16("portable", {"amx_bf16"})


def test_fits_are_cached_per_machine_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "choice.json"
    fake = FakeMachine()
    down = linear((S.Q6_K, 2048, 8192))
    assert chooser(path, fake).prefill_path(down, 64) == "native"
    measured = fake.calls
    assert measured > 0
    data = json.loads(path.read_text())
    assert list(data["fits"]) == [f"Test CPU|avx2|avx2 fma|t2|q{S.Q6_K}|c8192"]
    assert set(data["fits"][f"Test CPU|avx2|avx2 fma|t2|q{S.Q6_K}|c8192"]) == {
        "dots",
        "gemm",
        "native",
        "dense",
    }
    again = chooser(path, fake)  # another process on this machine: read, not measured
    assert again.prefill_path(down, 64) == "native" and again.prefill_path(down, 4096) == "dense"
    assert again.gemm_min_rows([down]) == 8
    assert fake.calls == measured
    chooser(path, fake, threads=1).prefill_path(down, 64)  # a new thread count is measured
    assert fake.calls == 2 * measured
    assert len(json.loads(path.read_text())["fits"]) == 2


def test_an_unreadable_file_is_measured_again_and_rewritten(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "choice.json"
    path.write_text('{"version": 1, "fits": {"x": {"gemm": [1]}}')  # cut short
    fake = FakeMachine()
    with caplog.at_level(logging.WARNING):
        assert chooser(path, fake).prefill_path(linear((S.Q4_K, 64, 256)), 64) == "native"
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: unreadable kernel choices (Expecting ',' delimiter: line 1 column 44 "
        "(char 43)); measuring again"
    ]
    assert fake.calls > 0 and len(json.loads(path.read_text())["fits"]) == 1


def test_steps_below_the_fewest_timed_rows_stay_on_the_dots() -> None:
    """A tiled matmul cheaper than the dots wherever it was timed (from 4 rows) still leaves
    the 1-3 row steps (decoding, a draft or two) to the dots: its line says nothing there."""
    cheap = FakeMachine({**COSTS, "gemm": (0.0, 0.2)})
    assert chooser(None, cheap).gemm_min_rows([linear((S.Q4_K, 64, 256))]) == 4


def test_a_key_written_without_a_path_is_measured_again(tmp_path: Path) -> None:
    path = tmp_path / "choice.json"
    key = f"Test CPU|avx2|avx2 fma|t2|q{S.Q4_K}|c256"
    old = {p: [1e-6, 1e-7] for p in ("dots", "gemm", "dense")}  # no "native"
    path.write_text(json.dumps({"version": native_choice.VERSION, "fits": {key: old}}))
    fake = FakeMachine()
    assert chooser(path, fake).prefill_path(linear((S.Q4_K, 64, 256)), 64) == "native"
    assert fake.calls > 0
    assert "native" in json.loads(path.read_text())["fits"][key]


class StallingMachine(FakeMachine):
    """Every run of the one-row dots stalls by a different whole time slice but one."""

    def run(self, path: str, part: S.EmMat, tokens: int) -> None:
        super().run(path, part, tokens)
        if path == "dots" and self.calls % 5:
            self.now += 0.004 * (self.calls % 7 + 1)


def test_an_unconfirmed_measurement_decides_but_is_not_cached(tmp_path: Path) -> None:
    """A best time no second run came near (a stalled or lucky run) decides for this process
    only: the next one measures again."""
    path = tmp_path / "choice.json"
    stalled = StallingMachine()
    assert chooser(path, stalled).gemm_min_rows([linear((S.Q4_K, 64, 256))]) == 8
    assert not path.exists()
    calls = stalled.calls
    chooser(path, stalled).gemm_min_rows([linear((S.Q4_K, 64, 256))])  # same process: held
    assert stalled.calls == calls
    never = FakeMachine({**COSTS, "dots": (0.0, 0.1)})
    assert chooser(None, never).gemm_min_rows([linear((S.Q4_K, 64, 256))]) == FOREVER


def test_time_taken_from_the_process_not_the_wall(tmp_path: Path) -> None:
    """A product whose thread waits (descheduled on a busy machine: here asleep) costs only the
    CPU time it computed, so the machine's other work does not decide the choice."""

    def run(path: str, part: S.EmMat, tokens: int) -> None:
        if path == "dots":  # little work, long waits
            time.sleep(0.02)
        else:  # real work, no waits
            end = time.process_time() + 2e-3 + 2e-5 * tokens
            while time.process_time() < end:
                pass

    choice = KernelChoice(None, "Test CPU|avx2|avx2 fma", run, lambda: 1)
    assert choice.clock is time.process_time
    assert choice.gemm_min_rows([linear((S.Q4_K, 64, 256))]) == FOREVER  # the dots cost ~0


def _first_prompt(runner: TorchRunner) -> None:
    runner.init_kv(16, 16)
    ids = [(7 * i) % 50 + 1 for i in range(70)]
    runner.forward(ForwardBatch([SeqStep(0, ids, list(range(70)), 0, list(range(5)))]))


def test_a_runner_writes_the_file_on_its_first_prompt_and_reads_it_next_time(
    tmp_path: Path, tiny_models: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(native_choice, "AGREE", float("inf"))  # a busy machine: keep them all
    build = native_build(TEST_CACHE / "native")  # the kernel tests' compiled library
    assert build.lib is not None, build.reason
    (tmp_path / "native").mkdir()
    for lib in (TEST_CACHE / "native").glob("ember_native_*.so"):
        shutil.copy(lib, tmp_path / "native")  # beside this test's cache: no second compile
    path = tiny_models.gguf("llama", "Q4_K_M")
    opts = TorchOptions(device="cpu", threads=1, packed_cache_dir=str(tmp_path / "packed"))
    runner = TorchRunner.load(path, opts)
    assert runner.kernels is not None and runner.kernels.choice is not None
    _first_prompt(runner)
    cache = tmp_path / "native" / "kernel_choice.json"
    keys = set(json.loads(cache.read_text())["fits"])
    parts = {
        (int(d.part[i].type), int(d.part[i].cols))
        for d in runner.native_linears
        for i in range(d.n_parts)
    }
    machine = f"{this_cpu().model}|{build.isa}|{build.features}|{build.key}|t1"
    bf16 = "|bf16" if native_choice.offers_bf16(build.isa, this_cpu().flags) else ""
    libraries = [lib.name for lib in (tmp_path / "native").glob("ember_native_*.so")]
    assert build.key and any(build.key in name for name in libraries), (build.key, libraries)
    assert keys == {f"{machine}|q{t}|c{c}{bf16}" for t, c in parts}
    paths = {p for fits in json.loads(cache.read_text())["fits"].values() for p in fits}
    assert paths == {"dots", "gemm", "native", "dense"} | ({"bf16"} if bf16 else set())
    assert runner.kernels.gemm_min_rows == runner.kernels.choice.gemm_min_rows(
        runner.native_linears
    )

    def no_measuring(*_: object) -> Callable[..., object]:
        raise AssertionError("measured again although the file holds this machine's fits")

    monkeypatch.setattr(native_choice.KernelChoice, "_measure", no_measuring)
    monkeypatch.setattr(native_choice, "_MEASURED", {})  # another process: only the file
    second = TorchRunner.load(path, opts)
    _first_prompt(second)
    assert second.kernels is not None
    assert second.kernels.gemm_min_rows == runner.kernels.gemm_min_rows
