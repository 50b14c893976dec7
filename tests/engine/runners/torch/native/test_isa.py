"""The one ISA dispatch (isa.py): the best path the CPU runs, EMBER_ISA forcing a lesser one,
and one clear line for an ISA the CPU lacks or a name that is none."""

from __future__ import annotations

import pytest

from ember.engine.errors import EngineError
from ember.engine.runners.torch.native import isa as native_isa
from ember.engine.runners.torch.native.compile import _compiler, load_library
from ember.engine.runners.torch.native.isa import Cpu, choose, runnable
from tests.conftest import TEST_CACHE

AVX2_EPYC = Cpu("x86_64", frozenset("sse2 avx fma f16c avx2 bmi2".split()))
AVX512_XEON = Cpu(
    "x86_64", frozenset("avx2 fma f16c avx512f avx512bw avx512vl avx512dq avx512_vnni".split())
)
GRAVITON = Cpu("aarch64", frozenset("fp asimd asimddp".split()))


def test_best_path_first() -> None:
    assert [i.name for i in runnable(AVX2_EPYC)] == ["avx2", "portable"]
    assert [i.name for i in runnable(AVX512_XEON)] == ["avx512", "avx2", "portable"]
    assert [i.name for i in runnable(GRAVITON)] == ["neon", "portable"]
    assert choose("", AVX512_XEON).name == "avx512" and choose("auto", GRAVITON).name == "neon"


def test_extensions_follow_the_cpu() -> None:
    avx512 = choose("avx512", AVX512_XEON)
    assert "-mavx512vnni" in avx512.compiler_flags(AVX512_XEON.flags)
    assert "-mavx512bf16" not in avx512.compiler_flags(AVX512_XEON.flags)
    neon = choose("neon", GRAVITON)
    assert neon.compiler_flags(GRAVITON.flags)[-1] == "-march=armv8.2-a+dotprod"


def test_forcing_a_path_the_cpu_lacks_is_one_line() -> None:
    with pytest.raises(EngineError) as err:
        choose("avx512", AVX2_EPYC)
    assert str(err.value) == (
        "EMBER_ISA=avx512: this CPU lacks avx512f, avx512bw, avx512vl, avx512dq "
        "(it runs: avx2, portable)"
    )
    with pytest.raises(EngineError, match=r"EMBER_ISA=neon: this CPU lacks an aarch64 CPU"):
        choose("neon", AVX2_EPYC)
    with pytest.raises(EngineError, match="EMBER_ISA=sse9: choose one of auto, avx512, avx2"):
        choose("sse9", AVX2_EPYC)


def test_ember_isa_setting_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_ISA", "portable")
    assert choose().name == "portable"
    monkeypatch.setenv("EMBER_ISA", " AUTO ")
    assert choose().name == runnable()[0].name


@pytest.mark.skipif(_compiler() is None, reason="no C compiler")
def test_forced_portable_build_has_no_simd(monkeypatch: pytest.MonkeyPatch) -> None:
    """Built in the tests' shared cache (the kernel tests build the same libraries)."""
    monkeypatch.setenv("EMBER_ISA", "portable")
    build = load_library(TEST_CACHE / "native")
    assert build.lib is not None and build.isa == "portable"
    if native_isa.this_cpu().machine == "x86_64":
        assert build.features == "scalar"  # the compiler's x86-64 baseline: no AVX paths
    best = load_library(TEST_CACHE / "native", "auto")
    assert best.isa == runnable()[0].name and best.lib is not None
    names = {p.name.split("_")[2] for p in (TEST_CACHE / "native").glob("ember_native_*.so")}
    assert {"portable", best.isa} <= names  # one library per ISA, side by side
