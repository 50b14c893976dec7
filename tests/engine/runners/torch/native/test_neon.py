"""The NEON kernels (ARM, with and without the dot-product extension) against the portable C
path, bit for bit: kernel_check.c built for aarch64 by Debian's gcc-aarch64-linux-gnu runs
under qemu-user-static, the same program built here with the portable flags is the reference
(the NEON dots sum the same integers and share the portable float steps). Skipped with the
reason where the cross compiler or qemu is missing (apt-get install gcc-aarch64-linux-gnu
qemu-user-static; .ci/run installs both and then requires them)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ember.engine.runners.torch.native.compile import CSRC, SOURCES
from ember.engine.runners.torch.native.isa import this_cpu

CHECK = Path(__file__).parent / "csrc" / "kernel_check.c"
COMMON = ("-O2", "-fopenmp", "-pthread", "-std=gnu11", "-ffp-contract=off", f"-I{CSRC}")
CROSS, QEMU = "aarch64-linux-gnu-gcc", "qemu-aarch64-static"
pytestmark = [
    pytest.mark.requires_tool(CROSS, "apt-get install gcc-aarch64-linux-gnu"),
    pytest.mark.requires_tool(QEMU, "apt-get install qemu-user-static"),
]


def _build(cc: str, flags: tuple[str, ...], out: Path) -> subprocess.Popen[str]:
    cmd = [cc, *COMMON, *flags, "-o", str(out), str(CHECK), *(str(CSRC / s) for s in SOURCES)]
    return subprocess.Popen(
        [*cmd, "-lm"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    if this_cpu().machine != "x86_64":
        pytest.skip("the portable reference is built for x86-64 here")
    root = tmp_path_factory.mktemp("neon")
    builds = {  # name: (compiler, flags, runner)
        "portable": ("gcc", ("-march=x86-64",), ()),
        "neon dotprod": (CROSS, ("-static", "-march=armv8.2-a+dotprod"), (QEMU,)),
        "neon": (CROSS, ("-static", "-march=armv8-a"), (QEMU,)),
    }
    procs = {
        name: _build(cc, flags, root / name.replace(" ", "_"))
        for name, (cc, flags, _) in builds.items()
    }
    results = {}
    for name, proc in procs.items():
        log = proc.communicate(timeout=600)[0]
        assert proc.returncode == 0, f"{name}: {log.strip().splitlines()[-1:]}"
        run = subprocess.run(
            [*builds[name][2], str(root / name.replace(" ", "_"))],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        results[name] = run.stdout.strip().splitlines()
    return results


def test_builds_use_their_paths(outputs: dict[str, list[str]]) -> None:
    assert outputs["portable"][-1] == "scalar"
    assert outputs["neon dotprod"][-1] == "neon dotprod"
    assert outputs["neon"][-1] == "neon"


@pytest.mark.parametrize("build", ["neon dotprod", "neon"])
def test_neon_equals_portable_bit_for_bit(outputs: dict[str, list[str]], build: str) -> None:
    reference = outputs["portable"][:-1]
    assert len(reference) == 30  # 10 formats: products, tiled products, dequantized rows
    for want, got in zip(reference, outputs[build][:-1], strict=True):
        assert got == want, f"{build}: {got.split()[0]} {got.split()[1]} differs from portable C"
