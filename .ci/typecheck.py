"""Type-check Ember the way it installs, so `ember.*` resolves to the real modules.

setuptools maps `ember.app` onto app/, `ember.engine` onto engine/, ... (package-dir in
pyproject.toml). mypy knows nothing of that mapping: run on the source folders it finds the
top-level ember/ without app/ under it, and every `from ember.X import ...` becomes an error or,
with ignore_missing_imports, a silent `Any`. So this script builds the installed layout as a tree
of symlinks under build/typecheck (read from pyproject's package-dir, so it cannot drift), runs
mypy on it with the settings in [tool.mypy], and writes the reported paths back as the real files.

The same run checks .ci/typecheck_probe.py: deliberately wrong cross-package calls, each marked
`# expect: [code]`. If mypy does not report every one of them, ember.* resolves to Any again and
the check fails, whatever else it found.

Usage: .ci/typecheck [extra mypy arguments]. The incremental cache lives in .mypy_cache/.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = Path("build/typecheck")  # relative to ROOT; pyproject's [tool.mypy] names the same place
PROBE = Path(".ci/typecheck_probe.py")
PROBE_MODULE = "typecheck_probe.py"  # its name inside the tree (a top-level module)
EXPECT = re.compile(r"#\s*expect:\s*\[([a-z-]+)\]")
REPORT = re.compile(r"^(?P<path>[^:\n]+\.pyi?):(?P<line>\d+):(?:\d+:)? (?P<kind>error|note):")


@dataclass(frozen=True)
class Link:
    shadow: Path  # the path inside the tree, relative to ROOT
    real: Path  # what it points at, relative to ROOT


def package_links(pyproject: dict) -> list[Link]:
    """The installed layout: one link per mapped sub-package, one per file of the root package.

    A root package (whose parent is not mapped, e.g. "ember" = "ember") becomes a real folder
    whose entries link to the source folder's entries, so mapped sub-packages can sit beside them.
    """
    package_dir: dict[str, str] = pyproject["tool"]["setuptools"]["package-dir"]
    links: list[Link] = []
    for name, folder in sorted(package_dir.items(), key=lambda item: item[0].count(".")):
        shadow = TREE.joinpath(*name.split("."))
        parent = name.rpartition(".")[0]
        if parent in package_dir:
            links.append(Link(shadow, Path(folder)))
            continue
        for entry in sorted((ROOT / folder).iterdir()):
            if entry.name != "__pycache__" and entry.name not in _children(name, package_dir):
                links.append(Link(shadow / entry.name, Path(folder) / entry.name))
    return links


def _children(package: str, package_dir: dict[str, str]) -> set[str]:
    return {n.rpartition(".")[2] for n in package_dir if n.rpartition(".")[0] == package}


def extra_links(pyproject: dict, packages: set[str]) -> list[Link]:
    """Other folders [tool.mypy] files names under the tree (tests/, benchmarks/): linked as is."""
    links = []
    for entry in pyproject["tool"]["mypy"]["files"]:
        path = Path(entry)
        if path.parent != TREE:
            sys.exit(f"pyproject.toml [tool.mypy] files: {entry!r} is not directly under {TREE}/")
        if path.name not in packages:
            links.append(Link(path, Path(path.name)))
    return links


def tree_links(pyproject: dict) -> list[Link]:
    """Every link of the tree: the installed packages, the other checked folders, the probe."""
    packages = {name.partition(".")[0] for name in pyproject["tool"]["setuptools"]["package-dir"]}
    return [
        *package_links(pyproject),
        *extra_links(pyproject, packages),
        Link(TREE / PROBE_MODULE, PROBE),
    ]


def build_tree(links: list[Link], base: Path = ROOT) -> None:
    """Recreate the tree under base (cheap: symlinks only; mypy's cache follows them)."""
    shutil.rmtree(base / TREE, ignore_errors=True)
    for link in links:
        shadow = base / link.shadow
        shadow.parent.mkdir(parents=True, exist_ok=True)
        shadow.symlink_to(os.path.relpath(ROOT / link.real, shadow.parent))


def to_real(text: str, links: list[Link]) -> str:
    """Rewrite tree paths in mypy's output as the real files' paths (longest link first)."""
    for link in sorted(links, key=lambda lk: len(str(lk.shadow)), reverse=True):
        text = text.replace(f"{link.shadow}/", f"{link.real}/").replace(
            f"{link.shadow}:", f"{link.real}:"
        )
    return text


def expectations(probe: Path) -> dict[int, str]:
    """Line number -> the error code mypy must report there."""
    expected = {}
    for number, line in enumerate(probe.read_text().splitlines(), start=1):
        if match := EXPECT.search(line):
            expected[number] = match.group(1)
    if not expected:
        sys.exit(f"{probe}: no `# expect: [code]` lines; the probe would prove nothing")
    return expected


def split_probe(lines: list[str], probe: str) -> tuple[list[str], list[tuple[int, str]]]:
    """Separate the probe's reports from the rest; the probe's errors as (line, code)."""
    rest, found = [], []
    for line in lines:
        match = REPORT.match(line)
        if match and match.group("path") == probe:
            if match.group("kind") == "error":
                code = re.search(r"\[([a-z-]+)\]$", line)
                found.append((int(match.group("line")), code.group(1) if code else ""))
            continue
        rest.append(line)
    return rest, found


def probe_failures(expected: dict[int, str], found: list[tuple[int, str]]) -> list[str]:
    failures = [
        f"{PROBE}:{n}: mypy did not report [{code}] here; ember.* may resolve to Any again"
        for n, code in sorted(expected.items())
        if (n, code) not in found
    ]
    failures += [
        f"{PROBE}:{n}: unexpected error [{code}] (only the marked lines may fail)"
        for n, code in found
        if expected.get(n) != code
    ]
    return failures


def main(argv: list[str]) -> int:
    os.chdir(ROOT)
    pyproject = tomllib.loads(Path("pyproject.toml").read_text())
    links = tree_links(pyproject)
    build_tree(links)

    files = [*pyproject["tool"]["mypy"]["files"], str(TREE / PROBE_MODULE)]
    command = [sys.executable, "-m", "mypy", "--no-error-summary", *argv, *files]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode not in (0, 1):  # 2: mypy itself failed (bad config, crash)
        sys.stderr.write(to_real(run.stdout + run.stderr, links))
        return run.returncode

    lines, found = split_probe(to_real(run.stdout, links).splitlines(), str(PROBE))
    failures = probe_failures(expectations(PROBE), found)
    errors = sum(1 for line in lines if (m := REPORT.match(line)) and m.group("kind") == "error")
    for line in [*lines, *failures]:
        print(line)
    sys.stderr.write(run.stderr)
    if errors or failures:
        print(f"typecheck: {errors} error(s), {len(failures)} probe failure(s)")
        return 1
    print(f"typecheck: no issues; the probe's {len(found)} cross-package errors were reported")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
