"""A fake Hugging Face Hub on 127.0.0.1 for the download tests, with fault injection.

It speaks the endpoints huggingface_hub and Ember use: model info (`/api/models/{repo}` and
`/revision/{rev}`, `?blobs=true` adds sizes and LFS digests), the file tree
(`/api/models/{repo}/tree/{rev}`), search (`/api/models?search=...&sort=downloads`) and file
transfer (`/{repo}/resolve/{rev}/{file}`, GET and HEAD, with ETag, X-Repo-Commit, Content-Length
and Range). Faults are set per file: drop the connection after N bytes, flip a byte, answer an
HTTP status, stall after N bytes until released, ignore Range, redirect (to anywhere, or in a
loop), or answer a page of another kind (a captive portal); per repo, the model info can be
answered with any page (`state.info_pages`) or rewritten (`state.info_patches`).

Run it by hand: `python -m tests.models.hub.hub_server DIR` serves every file under DIR/org/repo/.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from tests.models.hub.hub_repos import FakeRepo, Fault, HubState

__all__ = ["FakeRepo", "Fault", "HubServer", "HubState", "serve_folder", "use_hub"]

_CHUNK_BYTES = 1 << 20


class HubServer:
    """The threaded fake Hub; use as a context manager. `url` goes into HF_ENDPOINT."""

    def __init__(self) -> None:
        self.state = HubState()
        handler = type("BoundHandler", (_Handler,), {"state": self.state})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}"

    def __enter__(self) -> HubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.state.closing.set()
        self.state.release_stall.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def add_repo(self, repo_id: str, files: dict[str, bytes], **kwargs: object) -> FakeRepo:
        repo = FakeRepo(repo_id, files, **kwargs)  # type: ignore[arg-type]
        self.state.repos[repo_id] = repo
        return repo

    def set_fault(self, repo_id: str, path: str, fault: Fault) -> None:
        self.state.faults[(repo_id, path)] = fault

    def clear_faults(self) -> None:
        self.state.faults.clear()
        self.state.repo_status.clear()

    def served(self, repo_id: str, path: str) -> int:
        return self.state.bytes_served.get((repo_id, path), 0)

    def wait_served(self, repo_id: str, path: str, at_least: int, timeout_s: float = 30.0) -> bool:
        """Block until at least that many body bytes of the file were sent."""
        with self.state.changed:
            return self.state.changed.wait_for(
                lambda: self.served(repo_id, path) >= at_least, timeout=timeout_s
            )


_MODEL_API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?$")
_TREE_API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class _Handler(BaseHTTPRequestHandler):
    state: HubState
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_HEAD(self) -> None:  # noqa: N802
        self._route(head=True)

    def do_GET(self) -> None:  # noqa: N802
        self._route(head=False)

    def _route(self, head: bool) -> None:
        url = urlparse(self.path)
        path = unquote(url.path)
        query = parse_qs(url.query)
        with self.state.lock:
            self.state.requests.append((self.command, path, self.headers.get("Range")))
        if path == "/api/models":
            return self._search(query)
        if m := _TREE_API.match(path):
            return self._tree(m["repo"], m["path"] or "")
        if m := _MODEL_API.match(path):
            return self._info(m["repo"], m["rev"], "blobs" in query)
        if m := _RESOLVE.match(path):
            return self._resolve(m["repo"], m["rev"], m["path"], head)
        self._error(404, "EntryNotFound", "not found")

    def _json(self, value: object, status: int = 200) -> None:
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, code: str | None, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _repo(self, repo_id: str) -> FakeRepo | None:
        status = self.state.repo_status.get(repo_id)
        if status == 401:
            self._error(401, None, "Unauthorized")
            return None
        if status == 403:
            self._error(403, "GatedRepo", "Access to model is restricted")
            return None
        if status is not None:
            self._error(status, None, f"injected {status}")
            return None
        repo = self.state.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found")
        return repo

    def _card(self, repo: FakeRepo) -> dict[str, object]:
        extra: dict[str, object] = {}
        if "gguf" in repo.tags:
            extra["gguf"] = {
                "total": repo.parameters,
                "architecture": "llama",
                "context_length": 128,
            }
        if "safetensors" in repo.tags:
            extra["safetensors"] = {
                "parameters": {"F32": repo.parameters},
                "total": repo.parameters,
            }
        return extra | {
            "usedStorage": sum(len(b) for b in repo.files.values()),
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "sha": repo.commit,
            "downloads": repo.downloads,
            "likes": 0,
            "tags": repo.tags,
            "private": False,
            "gated": False,
            "createdAt": "2025-01-01T00:00:00.000Z",
            "lastModified": "2025-01-01T00:00:00.000Z",
        }

    def _info(self, repo_id: str, rev: str | None, blobs: bool) -> None:
        repo = self._repo(repo_id)
        if repo is None:
            return
        if rev not in (None, "main", repo.commit):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        if repo_id in self.state.info_pages:
            return self._page(*self.state.info_pages[repo_id])
        siblings = []
        for name in repo.files:
            item: dict[str, object] = {"rfilename": name}
            if blobs:
                item.update(repo.entry(name))
            siblings.append(item)
        answer = self._card(repo) | {"siblings": siblings}
        patch = self.state.info_patches.get(repo_id)
        self._json(patch(answer) if patch is not None else answer)

    def _page(self, content_type: str, body: bytes, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _tree(self, repo_id: str, prefix: str) -> None:
        repo = self._repo(repo_id)
        if repo is None:
            return
        items = []
        for name in sorted(repo.files):
            if prefix and not name.startswith(prefix.rstrip("/") + "/"):
                continue
            entry = repo.entry(name)
            item: dict[str, object] = {
                "type": "file",
                "oid": entry["blobId"],
                "size": entry["size"],
                "path": name,
            }
            if "lfs" in entry:
                lfs = dict(entry["lfs"])  # type: ignore[call-overload]
                item["lfs"] = {
                    "oid": lfs["sha256"],
                    "size": lfs["size"],
                    "pointerSize": lfs["pointerSize"],
                }
            items.append(item)
        self._json(items)

    def _search(self, query: dict[str, list[str]]) -> None:
        text = (query.get("search") or [""])[0].lower()
        wanted = set(query.get("filter") or [])
        limit = int((query.get("limit") or ["50"])[0])
        found = [
            r
            for r in self.state.repos.values()
            if text in r.repo_id.lower() and wanted.issubset(set(r.tags))
        ]
        found.sort(key=lambda r: -r.downloads)
        self._json([self._card(r) for r in found[:limit]])

    def _resolve(self, repo_id: str, rev: str, path: str, head: bool) -> None:
        repo = self._repo(repo_id)
        if repo is None:
            return
        if path not in repo.files:
            return self._error(404, "EntryNotFound", f"{path} does not exist on {rev}")
        key = (repo_id, path)
        fault = None if head else self.state.take_fault(key)
        if fault is not None and fault.status is not None:
            return self._error(fault.status, None, f"injected {fault.status}")
        if fault is not None and fault.redirect is not None:
            self.send_response(302)
            self.send_header("Location", self.path if fault.redirect == "SELF" else fault.redirect)
            self.send_header("Content-Length", "0")
            return self.end_headers()
        if fault is not None and fault.page is not None:
            return self._page(*fault.page)
        data = repo.files[path]
        start, end, status = 0, len(data), 200
        match = _RANGE.match(self.headers.get("Range", ""))
        if match and not (fault and fault.ignore_range):
            start = int(match[1])
            end = min(len(data), int(match[2]) + 1) if match[2] else len(data)
            if start >= len(data) and len(data) > 0:
                return self._error(416, None, "range not satisfiable")
            status = 206
        body = data[start:end]
        if fault is not None and fault.corrupt and body:
            middle = len(body) // 2
            body = body[:middle] + bytes([body[middle] ^ 0xFF]) + body[middle + 1 :]
        self.send_response(status)
        entry = repo.entry(path)
        etag = entry["lfs"]["sha256"] if "lfs" in entry else entry["blobId"]  # type: ignore[index]
        self.send_header("ETag", f'"{etag}"')
        self.send_header("X-Repo-Commit", repo.commit)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        self.end_headers()
        if not head:
            self._send_body(key, body, fault)

    def _send_body(self, key: tuple[str, str], body: bytes, fault: Fault | None) -> None:
        limit = len(body)
        if fault is not None and fault.drop_after is not None:
            limit = min(limit, fault.drop_after)
        stall_at = fault.stall_after if fault is not None else None
        view = memoryview(body)
        sent = 0
        try:
            while sent < limit:
                end = min(limit, sent + _CHUNK_BYTES)
                if stall_at is not None and sent <= stall_at < end:
                    end = stall_at
                if end > sent:
                    self.wfile.write(view[sent:end])
                    self.state.count(key, end - sent)
                    sent = end
                if stall_at is not None and sent == stall_at:
                    self.wfile.flush()
                    self.state.release_stall.wait()
                    stall_at = None
                    if self.state.closing.is_set():
                        break
        except (BrokenPipeError, ConnectionResetError):
            pass
        if sent < len(body):
            self.close_connection = True
            try:
                self.wfile.flush()
                self.connection.shutdown(2)  # socket.SHUT_RDWR: the client sees a short body
            except OSError:
                pass


def use_hub(monkeypatch: object, server: HubServer) -> None:
    """Point Ember (and huggingface_hub) at server: HF_ENDPOINT, online, no token."""
    monkeypatch.setenv("HF_ENDPOINT", server.url)  # type: ignore[attr-defined]
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # type: ignore[attr-defined]
    monkeypatch.delenv("HF_TOKEN", raising=False)  # type: ignore[attr-defined]


def serve_folder(root: Path) -> HubServer:
    """A server whose repos are the org/repo folders under root (for benchmarks and by hand)."""
    server = HubServer()
    for repo_dir in sorted(p for p in root.glob("*/*") if p.is_dir()):
        files = {
            str(f.relative_to(repo_dir)): f.read_bytes()
            for f in sorted(repo_dir.rglob("*"))
            if f.is_file()
        }
        server.add_repo(f"{repo_dir.parent.name}/{repo_dir.name}", files)
    return server


if __name__ == "__main__":
    import sys

    with serve_folder(Path(sys.argv[1])) as hub:
        print(hub.url, flush=True)
        threading.Event().wait()
