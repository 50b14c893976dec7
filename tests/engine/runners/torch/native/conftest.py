"""The native library, built once per test run into the shared test cache."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from ember.engine.runners.torch.native.compile import _compiler
from ember.engine.runners.torch.native.isa import ISAS, NAMES, this_cpu
from ember.engine.runners.torch.native.kernels import Kernels, native_build
from tests.conftest import TEST_CACHE


@pytest.fixture(scope="session", params=NAMES)
def kernels(request: pytest.FixtureRequest) -> Kernels:
    """The compiled kernels, once per ISA path (isa.py): every path this CPU runs is tested
    against the same references; the others skip with what the CPU lacks. Skipped only where no
    C compiler exists (then the runner uses torch's kernels, which other tests cover)."""
    if _compiler() is None:
        pytest.skip("no C compiler: the native kernels cannot be built here")
    cpu = this_cpu()
    isa = next(i for i in ISAS if i.name == request.param)
    lacks = isa.missing(cpu.machine, cpu.flags)
    if lacks:
        pytest.skip(f"ISA {isa.name}: this CPU lacks {', '.join(lacks)}")
    build = native_build(TEST_CACHE / "native", isa.name)
    assert build.lib is not None, build.reason
    assert build.isa == isa.name
    return Kernels(build.lib)


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread() -> Iterator[None]:
    """Small tensors: one thread avoids OpenMP barrier stalls on a busy 2-core box."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
