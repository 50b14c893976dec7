"""Build Ember's native CPU kernels (csrc/*.c) with the system's C compiler, once per machine.

The shared library is cached under a folder keyed by the sources, the compiler's version and
the ISA's compiler flags (isa.py chooses the ISA: the best this CPU runs, or EMBER_ISA), so
every start after the first only loads it (a few ms). Where no compiler works, `load_library` returns None with the reason, and
the torch runner uses its torch-kernel path instead (slower; measured by `ember bench`).

Nothing is written beside the sources: the library goes to the caller's cache folder (app:
<cache dir>/native), else to a private per-user temporary folder. A build holds a lock file
next to its output, so processes starting at once compile once and never load a partial file.

It links OpenMP by soname (libgomp.so.1), so inside a process that imported torch it shares
torch's OpenMP runtime and thread pool instead of starting a second one (the prefill-sized
calls use it); the decode step runs on the library's own small pool (csrc/pool.c).
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ember.engine.runners.torch.native.isa import Isa, choose, this_cpu

log = logging.getLogger(__name__)

CSRC = Path(__file__).parent / "csrc"
SOURCES = (
    "act_quant.c",
    "dot_legacy.c",
    "dot_kquants.c",
    "dot_float.c",
    "dot_multi.c",
    "gemm.c",
    "gemm_decode.c",
    "gemm_tile.c",
    "linear.c",
    "dequant.c",
    "attention.c",
    "forward.c",
    "moe.c",
    "moe_pages.c",
    "pool.c",
)
ABI_VERSION = 2  # em_abi_version() of csrc/ember_native.h
FLAGS = (  # beside the ISA's own (isa.py)
    "-O3",
    "-fopenmp",
    "-pthread",
    "-fPIC",
    "-shared",
    "-std=gnu11",
    "-ffp-contract=off",
)
_OFF = ("off", "0", "no", "false")


@dataclass(frozen=True)
class NativeBuild:
    """A loaded library, or why there is none."""

    lib: ctypes.CDLL | None
    reason: str = ""  # why lib is None
    features: str = ""  # what the library was compiled for (em_features: "avx2 fma f16c")
    isa: str = ""  # the ISA it was built for (isa.py)
    key: str = ""  # the build's hash (sources, compiler, flags: _key), in the library's name


def _compiler() -> str | None:
    for name in (os.environ.get("CC", ""), "gcc", "cc", "clang"):
        if name and shutil.which(name):
            return name
    return None


def _flags(isa: Isa) -> tuple[str, ...]:
    return FLAGS + isa.compiler_flags(this_cpu().flags)


def _key(cc: str, isa: Isa) -> str:
    """Sources + compiler version + build flags (OSError/TimeoutExpired: no cc)."""
    h = hashlib.sha256()
    for name in sorted(p.name for p in CSRC.iterdir()):
        h.update(name.encode())
        h.update((CSRC / name).read_bytes())
    version = subprocess.run(
        [cc, "--version"], capture_output=True, text=True, check=False, timeout=60
    )
    h.update(version.stdout.encode())
    h.update(" ".join(_flags(isa)).encode())
    return h.hexdigest()[:24]


def _build(cc: str, out: Path, isa: Isa) -> str:
    """Compile into out (atomically); '' or the compiler's complaint."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    cmd = [cc, *_flags(isa), "-o", tmp, *(str(CSRC / s) for s in SOURCES), "-lm"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines() or ["failed"]
            return f"{cc}: {lines[-1]}"
        os.replace(tmp, out)
        return ""
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{cc}: {exc}"
    finally:
        Path(tmp).unlink(missing_ok=True)


def _private_temp_dir() -> tuple[Path, str]:
    """A per-user folder in the temporary directory that only this user can write (a shared
    /tmp must not hand us someone else's library), or why there is none."""
    uid = getattr(os, "getuid", lambda: None)()
    root = Path(tempfile.gettempdir()) / f"ember-native-{uid if uid is not None else 'user'}"
    try:
        root.mkdir(mode=0o700, exist_ok=True)
        st = root.lstat()
    except OSError as exc:
        return root, f"{root}: {exc}"
    if uid is not None and (st.st_uid != uid or st.st_mode & 0o022 or root.is_symlink()):
        return root, f"{root}: not a private folder of this user"
    return root, ""


@contextmanager
def _build_lock(lock: Path) -> Iterator[None]:
    """An exclusive lock on the file lock (POSIX; elsewhere concurrent builds both run, and
    os.replace still keeps every loaded file whole)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _built(cc: str, root: Path, isa: Isa) -> tuple[Path, str]:
    """The library's path in root, compiled there unless another process already did."""
    path = root / f"ember_native_{isa.name}_{_key(cc, isa)}.so"
    if path.is_file():
        return path, ""
    with _build_lock(path.with_suffix(".lock")):
        if path.is_file():  # built while we waited for the lock
            return path, ""
        log.info("compiling Ember's native CPU kernels (%s) into %s (once)", isa.name, root)
        return path, _build(cc, path, isa)


def load_library(cache_dir: Path | None, isa: str | None = None) -> NativeBuild:
    """The native kernels for this machine, compiled on first use into cache_dir (a private
    temporary folder when None) for `isa` (default: EMBER_ISA, else the best this CPU runs).
    EMBER_NATIVE=off disables them. Never raises for a missing or failing compiler: the reason
    comes back instead; an ISA this CPU lacks raises EngineError (isa.choose)."""
    if os.environ.get("EMBER_NATIVE", "").lower() in _OFF and os.environ.get("EMBER_NATIVE"):
        return NativeBuild(None, "EMBER_NATIVE=off")
    target = choose(isa)
    cc = _compiler()
    if cc is None:
        return NativeBuild(None, "no C compiler (gcc, cc or clang) found")
    root, problem = (cache_dir, "") if cache_dir is not None else _private_temp_dir()
    if problem:
        return NativeBuild(None, problem)
    try:
        path, problem = _built(cc, root, target)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return NativeBuild(None, f"could not compile the native kernels ({cc}: {exc})")
    if problem:
        return NativeBuild(None, f"could not compile the native kernels ({problem})")
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        return NativeBuild(None, f"{path}: {exc}")
    if lib.em_abi_version() != ABI_VERSION:
        return NativeBuild(None, f"{path}: ABI {lib.em_abi_version()} != {ABI_VERSION}")
    lib.em_features.restype = ctypes.c_char_p
    key = path.stem.rsplit("_", 1)[-1]
    return NativeBuild(lib, features=lib.em_features().decode(), isa=target.name, key=key)
