"""Which files of a Hub repo make one model: pull references, GGUF quant groups, safetensors sets.

A reference is `org/repo` (best default quant), `org/repo:Q4_K_M`, `org/repo/path/file.gguf`, or
a safetensors repo (config, tokenizer files, every shard and the index; `org/repo:safetensors`
when the repo has GGUF files too); `@REV` after the repo pins a revision. Split GGUF (`name-00001-of-00003.gguf`) is one choice of several files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from ember.models.errors import DownloadError
from ember.models.files.pickles import PICKLE_SUFFIXES as _PICKLE_NAMES
from ember.models.hub.client import HubFile, RepoListing
from ember.text import has_controls

# Most-wanted first: a 4-bit K-quant is the usual sweet spot for small machines.
QUANT_PREFERENCE = [
    "Q4_K_M", "Q4_K_S", "Q4_K", "IQ4_XS", "IQ4_NL", "Q4_0", "Q5_K_M", "Q5_K_S", "Q5_0",
    "Q6_K", "Q8_0", "Q3_K_M", "Q3_K_L", "Q3_K_S", "BF16", "F16", "Q2_K", "F32",
]  # fmt: skip
_QUANT = re.compile(
    r"(?:^|[-._/])(?P<quant>I?Q\d(?:_[A-Z0-9]+)*|BF16|F16|F32|FP16|FP32)(?=[-._/]|$)", re.IGNORECASE
)
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")
_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
PICKLE_SUFFIXES = tuple(sorted(_PICKLE_NAMES))
HF_SIDE_FILES = {
    "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
    "tokenizer.model", "special_tokens_map.json", "added_tokens.json", "vocab.json",
    "merges.txt", "chat_template.jinja", "chat_template.json", "model.safetensors.index.json",
}  # fmt: skip


@dataclass(frozen=True)
class PullRef:
    """A parsed `ember pull` reference."""

    repo_id: str
    revision: str | None = None
    quant: str | None = None
    file: str | None = None

    def __str__(self) -> str:
        out = self.repo_id + (f"@{self.revision}" if self.revision else "")
        if self.file:
            return f"{out}/{self.file}"
        return out + (f":{self.quant}" if self.quant else "")


@dataclass(frozen=True)
class Choice:
    """One downloadable model in a repo: a GGUF quant (maybe split) or the safetensors set."""

    label: str  # the quant ("Q4_K_M"), the file name, or "safetensors"
    format: str  # "gguf" | "safetensors"
    files: list[HubFile]

    @property
    def size_bytes(self) -> int:
        return sum(f.size_bytes or 0 for f in self.files)


def parse_ref(ref: str) -> PullRef:
    """Parse org/repo[@rev][:QUANT] or org/repo[@rev]/path/file.gguf."""
    parts = ref.strip().split("/")
    if len(parts) < 2:
        raise DownloadError(f"{ref}: expected org/repo, org/repo:QUANT or org/repo/file.gguf")
    repo_part, rest = "/".join(parts[:2]), "/".join(parts[2:])
    quant = None
    if not rest and ":" in repo_part:
        repo_part, quant = repo_part.rsplit(":", 1)
    revision = None
    if "@" in repo_part:
        repo_part, revision = repo_part.split("@", 1)
    if not _REPO.match(repo_part) or ".." in repo_part:
        raise DownloadError(f"{ref}: {repo_part!r} is not a valid Hub repo id (org/repo)")
    if rest:
        check_safe_path(rest)
    return PullRef(repo_part, revision or None, quant.upper() if quant else None, rest or None)


MAX_NAME_BYTES = 240  # NAME_MAX is 255 on common file systems; ".part.json" must still fit


def check_safe_path(path: str) -> str:
    """Reject Hub file names that are absolute, contain '..' or could escape the model folder."""
    parts = PurePosixPath(path).parts
    bad = (
        not path
        or path.startswith(("/", "\\"))
        or "\\" in path
        or "\0" in path
        or re.match(r"^[A-Za-z]:", path) is not None
        or any(p in ("..", ".", "") for p in path.split("/"))
        or not parts
    )
    if bad:
        raise DownloadError(
            f"refusing Hub file name {path!r}: absolute or escapes the model folder"
        )
    if has_controls(path):
        raise DownloadError(f"refusing Hub file name {path!r}: it contains control characters")
    longest = max(len(p.encode("utf-8", "surrogatepass")) for p in path.split("/"))
    if longest > MAX_NAME_BYTES:
        shown = path if len(path) <= 60 else path[:40] + "..." + path[-12:]
        raise DownloadError(
            f"refusing Hub file name {shown!r}: a name of {longest} bytes does not fit the file "
            f"system (at most {MAX_NAME_BYTES}, leaving room for .part and .lock)"
        )
    return path


def quant_of(name: str) -> str | None:
    """The quant label in a GGUF file name ("model-Q4_K_M.gguf" -> "Q4_K_M"), upper-case."""
    stem = _SPLIT.sub("", name)
    stem = stem[: -len(".gguf")] if stem.lower().endswith(".gguf") else stem
    found = [m["quant"].upper() for m in _QUANT.finditer(stem)]
    if not found:
        return None
    label = found[-1]
    return {"FP16": "F16", "FP32": "F32"}.get(label, label)


def gguf_choices(listing: RepoListing) -> list[Choice]:
    """GGUF files grouped by quant (split shards together); projector files left out."""
    groups: dict[str, list[HubFile]] = {}
    for f in listing.files:
        name = f.path.rsplit("/", 1)[-1].lower()
        if not name.endswith(".gguf") or "mmproj" in name:
            continue
        label = quant_of(f.path) or f.path
        groups.setdefault(label, []).append(f)
    out = []
    for label, files in groups.items():
        files.sort(key=lambda f: f.path)
        split = [f for f in files if _SPLIT.search(f.path)]
        if len(files) > 1 and len(split) != len(files):
            files = [min(files, key=lambda f: (len(f.path), f.path))]  # same quant twice: one file
        elif split:
            prefix = _SPLIT.sub("", split[0].path)
            files = [f for f in split if _SPLIT.sub("", f.path) == prefix]
        out.append(Choice(label, "gguf", files))
    return sorted(out, key=_preference)


def _preference(choice: Choice) -> tuple[int, int]:
    rank = (
        QUANT_PREFERENCE.index(choice.label)
        if choice.label in QUANT_PREFERENCE
        else len(QUANT_PREFERENCE)
    )
    return (rank, choice.size_bytes)


def safetensors_choice(listing: RepoListing, shard_names: list[str] | None = None) -> Choice | None:
    """The safetensors set: top-level shards (those in the index when given) plus side files."""
    top = [f for f in listing.files if "/" not in f.path]
    shards = [f for f in top if f.path.endswith(".safetensors")]
    if shard_names is not None:
        wanted = set(shard_names)
        missing = wanted - {f.path for f in shards}
        if missing:
            raise DownloadError(
                f"{listing.repo_id}: the index names shards the repo lacks: {', '.join(sorted(missing))}"
            )
        shards = [f for f in shards if f.path in wanted]
    if not shards:
        return None
    side = [f for f in top if f.path in HF_SIDE_FILES]
    return Choice("safetensors", "safetensors", sorted(side + shards, key=lambda f: f.path))


def check_not_pickle_only(listing: RepoListing) -> None:
    """Refuse repos whose only weights are pickle checkpoints (they can run code when loaded)."""
    names = [f.path for f in listing.files]
    has_safe = any(n.endswith((".safetensors", ".gguf")) for n in names)
    pickles = [n for n in names if n.endswith(PICKLE_SUFFIXES)]
    if pickles and not has_safe:
        raise DownloadError(
            f"{listing.repo_id}: only pickle checkpoints ({', '.join(pickles[:3])}); Ember never loads "
            "pickle files because they can run code. Look for a safetensors or GGUF version "
            "(`ember search NAME --gguf`)"
        )


def choose(listing: RepoListing, ref: PullRef, shard_names: list[str] | None = None) -> Choice:
    """The files to fetch for ref; DownloadError names what is missing and what exists."""
    for f in listing.files:
        check_safe_path(f.path)
    if ref.file:
        return _choose_file(listing, ref.file)
    check_not_pickle_only(listing)
    if ref.quant == "SAFETENSORS":  # org/repo:safetensors when a repo also has GGUF files
        choice = safetensors_choice(listing, shard_names)
        if choice is None:
            raise DownloadError(f"{ref}: no safetensors weights in {listing.repo_id}")
        return choice
    ggufs = gguf_choices(listing)
    if ref.quant:
        for c in ggufs:
            if c.label == ref.quant:
                split_count_ok(c)
                return c
        have = ", ".join(c.label for c in ggufs) or "none"
        raise DownloadError(f"{ref}: no {ref.quant} GGUF in {listing.repo_id} (has: {have})")
    if ggufs:
        split_count_ok(ggufs[0])
        return ggufs[0]
    choice = safetensors_choice(listing, shard_names)
    if choice is None:
        raise DownloadError(f"{ref}: no GGUF or safetensors weights in {listing.repo_id}")
    return choice


def _choose_file(listing: RepoListing, path: str) -> Choice:
    f = listing.file(path)
    if f is None:
        raise DownloadError(f"{listing.repo_id}/{path}: file not found in the repo")
    if path.endswith(PICKLE_SUFFIXES):
        check_not_pickle_only(RepoListing(listing.repo_id, listing.commit, [f]))
    if not path.endswith(".gguf"):
        raise DownloadError(f"{listing.repo_id}/{path}: only .gguf files can be pulled one by one")
    match = _SPLIT.search(path)
    if match:
        prefix = path[: match.start()]
        shards = [g for g in listing.files if g.path.startswith(prefix) and _SPLIT.search(g.path)]
        choice = Choice(quant_of(path) or path, "gguf", sorted(shards, key=lambda g: g.path))
        split_count_ok(choice)
        return choice
    return Choice(quant_of(path) or path, "gguf", [f])


def split_count_ok(choice: Choice) -> None:
    """A split GGUF must have every shard -00001-of-N .. -N-of-N."""
    counts = {int(m.group(2)) for f in choice.files if (m := _SPLIT.search(f.path))}
    if not counts:
        return
    expected = counts.pop()
    if counts or len(choice.files) != expected:
        names = ", ".join(f.path for f in choice.files)
        raise DownloadError(f"{choice.label}: split GGUF is incomplete on the Hub ({names})")
