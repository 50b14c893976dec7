"""FakeCatalog: an in-memory ModelCatalog for tests and `ember --fake` demos."""

from __future__ import annotations

import threading
import time

from ember.app.catalog.catalog import HubRepo, LocalModel, ProgressCallback, QuantOption
from ember.models.errors import DownloadError, RegistryError

CURATED = [
    HubRepo("unsloth/gemma-3-270m-it-GGUF", 120000, 300, "Gemma 3 270M, tiny and quick"),
    HubRepo("Qwen/Qwen3-0.6B-GGUF", 90000, 250, "Qwen3 0.6B"),
    HubRepo("bartowski/Llama-3.2-1B-Instruct-GGUF", 80000, 200, "Llama 3.2 1B Instruct"),
]


class FakeCatalog:
    """Local models in a list; 'downloads' move through progress steps and honour cancel."""

    def __init__(
        self,
        models: list[LocalModel] | None = None,
        starter: bool = True,
        sibling: bool = True,
        download_steps: int = 5,
        step_s: float = 0.0,
        download_error: str = "",
        offline: bool = False,
    ) -> None:
        self.models = list(models or [])
        self.starter = starter
        self.sibling = sibling  # the catalog has the starter's IT sibling and the Hub is on
        self.download_steps = download_steps
        self.step_s = step_s
        self.download_error = download_error
        self.offline_mode = offline
        self.release = threading.Event()  # set to let a paused download continue
        self.release.set()
        self.partial: dict[str, int] = {}  # filename -> steps done (a resumable .part)

    def list_local(self) -> list[LocalModel]:
        return list(self.models)

    def delete(self, name: str) -> None:
        if not any(m.name == name for m in self.models):
            raise RegistryError(f"{name}: no such model")
        self.models = [m for m in self.models if m.name != name]

    def starter_available(self) -> bool:
        return self.starter

    def install_starter(self) -> LocalModel:
        model = LocalModel("gemma3-270m", 253_000_000, "Q4_K_M", "gemma3", None)
        self.models.append(model)
        return model

    def starter_sibling(self) -> tuple[HubRepo, QuantOption] | None:
        if not self.sibling:
            return None
        return CURATED[0], QuantOption("Q4_K_M", "Q4_K_M", 253_000_000)

    def curated(self) -> list[HubRepo]:
        return list(CURATED)

    def offline(self) -> bool:
        return self.offline_mode

    def search(self, query: str) -> list[HubRepo]:
        if self.offline_mode:  # the real client's wording
            raise DownloadError("search: offline mode is on (HF_HUB_OFFLINE=1 or --offline)")
        return [r for r in CURATED if query.lower() in r.repo_id.lower()]

    def quants(self, repo_id: str) -> list[QuantOption]:
        if self.offline_mode:
            raise DownloadError(f"{repo_id}: offline mode is on; cannot list the repo on the Hub")
        stem = repo_id.split("/")[-1].removesuffix("-GGUF")
        return [
            QuantOption(f"{stem}-Q4_K_M.gguf", "Q4_K_M", 400_000_000),
            QuantOption(f"{stem}-Q8_0.gguf", "Q8_0", 700_000_000),
            QuantOption(f"{stem}-F16.gguf", "F16", 10**15),
        ]

    def download(
        self, repo_id: str, filename: str, progress: ProgressCallback, cancel: threading.Event
    ) -> LocalModel:
        total = self.download_steps * 1000
        done = self.partial.get(filename, 0)  # resume where a cancelled download stopped
        while done < self.download_steps:
            self.release.wait()
            if cancel.is_set():
                self.partial[filename] = done
                raise DownloadError(f"{filename}: download cancelled (resumable)")
            if self.download_error:
                raise DownloadError(f"{filename}: {self.download_error}")
            if self.step_s:
                time.sleep(self.step_s)
            done += 1
            progress(done * 1000, total)
        self.partial.pop(filename, None)
        model = LocalModel(filename.removesuffix(".gguf").lower(), total, "Q4_K_M", "fake", None)
        self.models.append(model)
        return model
