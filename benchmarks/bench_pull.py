"""Pull throughput from a local fake Hub: Ember's downloader vs `curl` on the same file.

The server runs in its own process (tests/models/hub/hub_server.py) so it does not share a GIL with
the client. Each run downloads to a fresh path; the medians of N runs are compared side by side.
Ember's time includes the SHA-256 check and the atomic rename; curl only writes the bytes.

    python benchmarks/bench_pull.py [--file PATH] [--runs 5]

Default file: the starter model (253 MB) when installed, else 256 MB of random bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _source_file(work: Path, given: str | None) -> Path:
    if given:
        return Path(given)
    try:
        from ember.models.registry.starter import starter_installed, starter_path

        if starter_installed():
            return starter_path(ROOT / "tests" / ".cache" / "models")
    except Exception:  # noqa: BLE001 - fall back to random bytes
        pass
    path = work / "random.gguf"
    with path.open("wb") as f:
        for _ in range(256):
            f.write(os.urandom(1 << 20))
    return path


def _start_server(root: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.models.hub.hub_server", str(root)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    return proc, url


def _time_curl(url: str, dest: Path) -> float:
    start = time.perf_counter()
    subprocess.run(["curl", "-sf", "-o", str(dest), url], check=True)
    return time.perf_counter() - start


def _time_ember(url: str, dest: Path, size: int, sha256: str) -> float:
    from ember.models.hub.download import Downloader, RemoteFile

    start = time.perf_counter()
    Downloader(headers={}).fetch(RemoteFile(dest.name, url, dest, size, sha256))
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", help="file to serve (default: the starter model)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_pull_") as tmp:
        work = Path(tmp)
        source = _source_file(work, args.file)
        repo = work / "hub" / "bench" / "model"
        repo.mkdir(parents=True)
        shutil.copyfile(source, repo / "model.gguf")
        size = source.stat().st_size
        sha256 = hashlib.sha256(source.read_bytes()).hexdigest()
        proc, base = _start_server(work / "hub")
        url = f"{base}/bench/model/resolve/main/model.gguf"
        try:
            curl_s, ember_s = [], []
            for i in range(args.runs):  # interleaved so both see the same machine load
                curl_s.append(_time_curl(url, work / f"curl{i}.bin"))
                (work / f"curl{i}.bin").unlink()
                ember_s.append(_time_ember(url, work / f"ember{i}.gguf", size, sha256))
                (work / f"ember{i}.gguf").unlink()
        finally:
            proc.terminate()
            proc.wait(10)
    curl_mb_s = size / statistics.median(curl_s) / 1e6
    ember_mb_s = size / statistics.median(ember_s) / 1e6
    print(f"file: {source} ({size / 1e6:.1f} MB), {args.runs} runs, medians")
    print(f"curl:  {curl_mb_s:8.1f} MB/s  ({statistics.median(curl_s):.3f} s)")
    print(
        f"ember: {ember_mb_s:8.1f} MB/s  ({statistics.median(ember_s):.3f} s, incl. SHA-256 + rename)"
    )
    print(f"ratio ember/curl: {ember_mb_s / curl_mb_s:.2f} (target >= 0.80)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
