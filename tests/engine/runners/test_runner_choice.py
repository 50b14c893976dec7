"""`--runner auto` by measurement: which runner wins, what is cached, when it is measured again
(fake runners on a fake clock), and once through the real path on the starter model."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ember.engine.api import EngineOptions, ModelFiles
from ember.engine.errors import EngineError
from ember.engine.runners import factory, runner_choice, runner_timing
from ember.engine.runners.base import ForwardBatch
from ember.engine.runners.fake import FakeRunner


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class TimedRunner(FakeRunner):
    """A FakeRunner named like a real one whose forwards take s_per_token on the fake clock."""

    def __init__(
        self, name: str, clock: Clock, s_per_token: float, stalls: frozenset[int] = frozenset()
    ) -> None:
        super().__init__()
        self.info = replace(self.info, name=name)
        self.clock, self.s_per_token, self.stalls = clock, s_per_token, stalls
        self.steps = 0

    def forward(self, batch: ForwardBatch) -> Any:
        self.clock.now += self.s_per_token * batch.num_tokens
        if self.steps in self.stalls:  # the machine was busy during this step
            self.clock.now += 1.0
        self.steps += 1
        return super().forward(batch)

    def close(self) -> None:
        self.closed = True


class Loads:
    """The loader choose_runner calls: records which runners it loaded (and with what)."""

    def __init__(self, clock: Clock, speeds: dict[str, float], fail: str = "") -> None:
        self.clock, self.speeds, self.fail = clock, speeds, fail
        self.loaded: list[TimedRunner] = []

    def __call__(self, name: str, options: EngineOptions) -> TimedRunner:
        if name == self.fail:
            raise EngineError(f"{name} cannot load this")
        runner = TimedRunner(name, self.clock, self.speeds[name])
        self.loaded.append(runner)
        return runner


@pytest.fixture
def model(tiny_models: Any) -> ModelFiles:
    return ModelFiles("tiny", tiny_models.gguf("llama", "Q8_0"), "gguf", "cd" * 32)


@pytest.fixture
def options(tmp_path: Path) -> EngineOptions:
    return EngineOptions(model="tiny", device="cpu", runner_choice_dir=str(tmp_path / "choice"))


def test_the_faster_runner_wins_the_loser_is_closed_and_the_choice_is_cached(
    options: EngineOptions, model: ModelFiles
) -> None:
    clock = Clock()
    # torch is faster in most rounds but not all: the median of per-round ratios decides
    loads = Loads(clock, {"llama.cpp": 0.010, "torch": 0.008})
    runner = runner_choice.choose_runner(options, model, loads, clock)
    llama, torch = loads.loaded
    assert runner is torch and llama.closed and not torch.closed
    cached = json.loads(Path(options.runner_choice_dir, "runner-choice.json").read_text())
    (key, entry), = cached["entries"].items()  # fmt: skip
    assert key.endswith(model.digest) and "|t0|kv-f16|" in key
    assert entry["runner"] == "torch" and entry["ratio"] == pytest.approx(1.25)
    assert entry["decode_tok_s"] == {
        "llama.cpp": pytest.approx(100.0),
        "torch": pytest.approx(125.0),
    }
    assert entry["rounds"] >= runner_timing.MIN_ROUNDS and entry["cost_s"] > 0
    assert entry["versions"] == runner_choice.versions()
    assert "torch: measured faster here, decode 125.0 vs llama.cpp 100.0" in entry["reason"]

    again = Loads(clock, {"llama.cpp": 0.001, "torch": 1.0})  # cached: nothing is timed
    runner = runner_choice.choose_runner(options, model, again, clock)
    assert [r.info.name for r in again.loaded] == ["torch"] and runner is again.loaded[0]
    assert again.loaded[0].steps == 0


def test_llamacpp_wins_when_faster(options: EngineOptions, model: ModelFiles) -> None:
    clock = Clock()
    loads = Loads(clock, {"llama.cpp": 0.010, "torch": 0.012})
    runner = runner_choice.choose_runner(options, model, loads, clock)
    assert runner.info.name == "llama.cpp" and loads.loaded[1].closed
    assert runner_choice.lookup(options, model).runner == "llama.cpp"  # type: ignore[union-attr]


def test_measured_again_when_versions_change_or_the_cache_is_unreadable(
    options: EngineOptions, model: ModelFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    runner_choice.choose_runner(
        options, model, Loads(clock, {"llama.cpp": 0.01, "torch": 0.02}), clock
    )
    newer = {**runner_choice.versions(), "llama_cpp_python": "9.9.9"}
    monkeypatch.setattr(runner_choice, "versions", lambda: newer)
    assert runner_choice.lookup(options, model) is None
    loads = Loads(clock, {"llama.cpp": 0.02, "torch": 0.01})
    assert runner_choice.choose_runner(options, model, loads, clock).info.name == "torch"
    assert len(loads.loaded) == 2
    Path(options.runner_choice_dir, "runner-choice.json").write_text("{not json")
    loads = Loads(clock, {"llama.cpp": 0.01, "torch": 0.02})
    assert runner_choice.choose_runner(options, model, loads, clock).info.name == "llama.cpp"
    assert len(loads.loaded) == 2


def test_without_a_cache_dir_every_load_measures(options: EngineOptions, model: ModelFiles) -> None:
    clock, uncached = Clock(), replace(options, runner_choice_dir="")
    for _ in range(2):
        loads = Loads(clock, {"llama.cpp": 0.01, "torch": 0.02})
        runner_choice.choose_runner(uncached, model, loads, clock)
        assert len(loads.loaded) == 2


def test_the_machine_and_settings_key_the_cache(options: EngineOptions, model: ModelFiles) -> None:
    clock = Clock()
    runner_choice.choose_runner(
        options, model, Loads(clock, {"llama.cpp": 0.01, "torch": 0.02}), clock
    )
    assert runner_choice.lookup(options, model) is not None
    assert runner_choice.lookup(replace(options, threads=1), model) is None
    assert runner_choice.lookup(replace(options, kv_cache="q8"), model) is None
    assert runner_choice.lookup(options, replace(model, digest="ef" * 32)) is None


def test_one_runner_that_cannot_load_it_leaves_the_other(
    options: EngineOptions, model: ModelFiles
) -> None:
    clock = Clock()
    loads = Loads(clock, {"llama.cpp": 0.01, "torch": 0.001}, fail="torch")
    runner = runner_choice.choose_runner(options, model, loads, clock)
    assert runner.info.name == "llama.cpp" and loads.loaded[0].steps == 0  # nothing timed
    choice = runner_choice.lookup(options, model)
    assert (
        choice is not None and "the torch runner cannot load it (torch cannot load" in choice.reason
    )
    no_llama = Loads(clock, {"torch": 0.01}, fail="llama.cpp")
    fresh = replace(options, runner_choice_dir="")
    assert runner_choice.choose_runner(fresh, model, no_llama, clock).info.name == "torch"


def test_when_neither_loads_the_llamacpp_error_is_raised(
    options: EngineOptions, model: ModelFiles
) -> None:
    class Neither(Loads):
        def __call__(self, name: str, options: EngineOptions) -> TimedRunner:
            raise EngineError(f"{name}: broken file")

    with pytest.raises(EngineError, match="llama.cpp: broken file"):
        runner_choice.choose_runner(options, model, Neither(Clock(), {}), Clock())


def test_an_architecture_torch_lacks_goes_to_llamacpp_unmeasured(
    options: EngineOptions, model: ModelFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ember.engine.runners.torch import arch

    monkeypatch.delitem(arch.ARCHS, "llama")
    clock = Clock()
    loads = Loads(clock, {"llama.cpp": 0.01, "torch": 0.001})
    runner = runner_choice.choose_runner(options, model, loads, clock)
    assert [r.info.name for r in loads.loaded] == ["llama.cpp"] and runner is loads.loaded[0]
    assert loads.loaded[0].steps == 0
    choice = runner_choice.lookup(options, model)
    assert choice is not None and "the torch runner has no 'llama' architecture" in choice.reason


def test_progress_says_why_the_load_takes_longer(model: ModelFiles, tmp_path: Path) -> None:
    heard: list[tuple[str, int, int]] = []
    options = EngineOptions(model="tiny", runner_choice_dir=str(tmp_path),
                            progress=lambda *a: heard.append(a))  # fmt: skip
    clock = Clock()
    runner_choice.choose_runner(
        options, model, Loads(clock, {"llama.cpp": 0.01, "torch": 0.02}), clock
    )
    stages = [stage for stage, _, _ in heard]
    assert all(s.startswith(runner_choice.STAGE) for s in stages)
    assert f"{runner_choice.STAGE}: loading the torch runner" in stages
    assert heard[-1][1] == heard[-1][2]  # it ends at 100%


def test_a_stalled_round_does_not_decide() -> None:
    """torch is faster in every round but one, where the machine stalled it for a second."""
    clock = Clock()
    # torch's forwards: 0 prompt, 1 warm-up, then DECODE_TOKENS per round: stall round 1
    stalled = frozenset({2 + runner_timing.DECODE_TOKENS})
    runners: dict[str, Any] = {
        "llama.cpp": TimedRunner("llama.cpp", clock, 0.010),
        "torch": TimedRunner("torch", clock, 0.008, stalled),
    }
    timing = runner_timing.time_decode(runners, None, clock)
    assert timing.ratio == pytest.approx(1.25)  # the median of per-round ratios
    assert runner_choice.measured_choice(runners, None, clock).runner == "torch"


def test_timing_alternates_and_keeps_rounds_within_bounds() -> None:
    clock = Clock()
    runners: dict[str, Any] = {
        "llama.cpp": TimedRunner("llama.cpp", clock, 0.5),  # slow: MIN_ROUNDS exceed the budget
        "torch": TimedRunner("torch", clock, 0.25),
    }
    timing = runner_timing.time_decode(runners, None, clock)
    assert timing.rounds == runner_timing.MIN_ROUNDS and timing.ratio == pytest.approx(2.0)
    fast = {n: TimedRunner(n, clock, 1e-6) for n in ("llama.cpp", "torch")}
    assert runner_timing.time_decode(fast, None, clock).rounds == runner_timing.MAX_ROUNDS  # type: ignore[arg-type]


@pytest.mark.model
def test_the_real_runners_are_measured_once_then_the_cache_decides(
    starter_files: ModelFiles, tmp_path: Path
) -> None:
    """Both real runners on the starter: timed on the first load (the stage is heard), the
    winner generates, the choice is written; the second load reads it and times nothing."""
    from ember.engine.api import GenerationRequest, SamplingParams
    from ember.engine.engine import Engine
    from ember.engine.events import Finished
    from tests.conftest import PACKED_CACHE_DIR

    heard: list[str] = []
    options = EngineOptions(
        model=starter_files.name,
        device="cpu",
        ctx=256,
        prefix_cache=False,
        packed_cache_dir=PACKED_CACHE_DIR,
        runner_choice_dir=str(tmp_path),
        progress=lambda stage, done, total: heard.append(stage),
    )
    sampling = SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True)
    request = GenerationRequest(prompt="The capital of France is", sampling=sampling)
    engine = Engine.load(options, starter_files)  # factory.create_runner: measures
    try:
        (finished,) = [e for e in engine.generate(request) if isinstance(e, Finished)]
    finally:
        engine.close()
    chosen = engine.runner.info.name
    assert finished.reason == "length" and len(finished.token_ids) == 4
    assert runner_choice.STAGE in heard  # the first load said why it takes longer
    cache = tmp_path / runner_choice.CACHE_NAME
    first = json.loads(cache.read_text())
    (entry,) = first["entries"].values()
    assert entry["runner"] == chosen and set(entry["decode_tok_s"]) == {"llama.cpp", "torch"}
    assert min(entry["decode_tok_s"].values()) > 0 and entry["cost_s"] > 0
    heard.clear()
    again = factory.create_runner(options, starter_files)  # reads the cache
    again.close()
    assert again.info.name == chosen
    assert not any(stage.startswith(runner_choice.STAGE) for stage in heard)
    assert json.loads(cache.read_text()) == first  # read, not measured again
