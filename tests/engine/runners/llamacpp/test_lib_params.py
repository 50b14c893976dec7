"""llama_model_params as Ember writes them, read back from the installed llama-cpp-python's own
ctypes struct: a field that struct lacks would be set silently and do nothing."""

from __future__ import annotations

import pytest

from ember.engine.runners.llamacpp.lib import amx_build, lib, load_mode, model_params


def _fields(params: object) -> set[str]:
    return {name for name, *_ in type(params)._fields_}  # type: ignore[attr-defined]


@pytest.mark.parametrize("use_mmap", [True, False])
@pytest.mark.parametrize("use_mlock", [True, False])
def test_mmap_and_mlock_reach_a_field_llama_cpp_reads(use_mmap: bool, use_mlock: bool) -> None:
    llama = lib()
    params = model_params(llama, 0, use_mmap, use_mlock)
    assert params.n_gpu_layers == 0
    if "load_mode" in _fields(params):
        assert params.load_mode == load_mode(llama, use_mmap, use_mlock)
        assert "use_mmap" not in params.__dict__  # nothing written beside the struct's fields
    else:
        assert (params.use_mmap, params.use_mlock) == (use_mmap, use_mlock)


def test_load_modes_are_distinct() -> None:
    llama = lib()
    if not hasattr(llama, "LLAMA_LOAD_MODE_MMAP"):
        pytest.skip("this llama-cpp-python still has use_mmap / use_mlock fields")
    modes = {load_mode(llama, m, k) for m in (True, False) for k in (True, False)}
    assert modes == {
        llama.LLAMA_LOAD_MODE_MMAP,
        llama.LLAMA_LOAD_MODE_MMAP_MLOCK,
        llama.LLAMA_LOAD_MODE_MLOCK,
        llama.LLAMA_LOAD_MODE_NONE,
    }


def test_amx_build_is_read_from_the_system_info() -> None:
    on = "CPU : AVX512 = 1 | AVX512_VNNI = 1 | AMX_INT8 = 1 | REPACK = 1 |"
    assert amx_build(on)
    assert not amx_build(on.replace("AMX_INT8 = 1", "AMX_INT8 = 0"))
    assert not amx_build("CPU : AVX2 = 1 | REPACK = 1 |")


def test_an_amx_build_loads_without_extra_weight_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """On an AMX build the extra buffers (where llama.cpp's AMX matmul lives) stay off; on any
    other build llama.cpp's default (repacked weights) stays."""
    llama = lib()
    if "use_extra_bufts" not in _fields(llama.llama_model_default_params()):
        pytest.skip("this llama-cpp-python has no use_extra_bufts field")
    info = llama.llama_print_system_info().decode()
    default = llama.llama_model_default_params().use_extra_bufts
    assert model_params(llama, 0, True, False).use_extra_bufts == (default and not amx_build(info))
    amx = info + " AMX_INT8 = 1 |"
    monkeypatch.setattr(llama, "llama_print_system_info", lambda: amx.encode())
    assert model_params(llama, 0, True, False).use_extra_bufts is False
