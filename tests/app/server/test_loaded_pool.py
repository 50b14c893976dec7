"""The one pool behind ModelPool and EmbedderPool: LRU unload of idle things, keep_alive,
unload now unless busy, the naming rules of a request's model."""

from __future__ import annotations

import time

import anyio
import pytest

from ember.app.server.embedder_pool import EmbedderPool
from ember.app.server.errors import RequestInvalid
from ember.app.server.loaded_pool import LoadedPool
from ember.app.server.pool import ModelPool
from ember.models.errors import RegistryError
from tests.app.scripted_backend import ScriptedBackend
from tests.waiting import wait_until


class Thing:
    def __init__(self, name: str) -> None:
        self.name, self.closed = name, False

    def close(self) -> None:
        self.closed = True


class Loader:
    def __init__(self) -> None:
        self.made: list[Thing] = []

    def __call__(self, name: str) -> Thing:
        if name == "missing":
            raise RegistryError(f"model {name!r} not found")
        self.made.append(Thing(name))
        return self.made[-1]


def _pool(max_loaded: int = 1) -> tuple[LoadedPool[Thing], Loader]:
    loader = Loader()
    return LoadedPool(loader, lambda requested: requested or "a", max_loaded), loader


def test_idle_things_leave_least_recently_used_first_busy_ones_stay() -> None:
    pool, loader = _pool(max_loaded=1)
    a = pool.get("a")
    b = pool.get("b")  # a is in use: both stay
    assert pool.loaded() == ["a", "b"] and not a.closed
    assert pool.get("a") is a and len(loader.made) == 2  # reused, not loaded again
    pool.release("a")
    pool.release("a")  # a idle again: over max_loaded, so it goes (b is busy)
    assert a.closed and pool.loaded() == ["b"]
    pool.release("b")
    assert pool.loaded() == ["b"] and not b.closed


def test_unload_now_refuses_a_busy_thing() -> None:
    pool, _ = _pool(max_loaded=2)
    a = pool.get("a")
    assert pool.unload("a") is False and not a.closed  # serving a request
    pool.release("a")
    assert pool.unload("a") is True and a.closed and pool.loaded() == []
    assert pool.unload("a") is False  # not loaded


def test_keep_alive_zero_later_and_forever() -> None:
    pool, _ = _pool(max_loaded=3)
    a = pool.get("a")
    pool.release("a", keep_alive_s=0)
    assert a.closed and pool.loaded() == []
    b = pool.get("b")
    pool.release("b", keep_alive_s=0.2)
    assert pool.loaded() == ["b"]
    wait_until(lambda: b.closed, "the keep_alive timer closes b", 20)
    assert pool.loaded() == []  # the timer swept it
    c = pool.get("c")
    pool.release("c", keep_alive_s=-1)  # kept until stopped
    far = pool.expires_at("c")
    assert int(far[:4]) > time.gmtime().tm_year + 5 and not c.closed
    pool.close()
    assert c.closed and pool.loaded() == []


def test_an_unknown_name_is_404_naming_the_model() -> None:
    pool, _ = _pool()
    with pytest.raises(RequestInvalid) as err:
        pool.get("missing")
    assert err.value.status == 404 and err.value.param == "model"


def test_embedders_share_the_pool_and_the_model_pools_naming_rules() -> None:
    models = ModelPool(lambda n: ScriptedBackend(n, ["x"]), lambda: ["bert", "chat"], "bert")
    loader = Loader()
    embedders = EmbedderPool(loader, models, max_loaded=1)  # type: ignore[arg-type]
    assert isinstance(embedders, LoadedPool) and isinstance(models, LoadedPool)

    async def acquire(requested: str | None) -> str:
        name, _ = await embedders.acquire(requested)
        return name

    assert anyio.run(acquire, None) == "bert"  # the server's default model
    with pytest.raises(RequestInvalid) as err:
        anyio.run(acquire, "elsewhere")
    assert err.value.status == 404 and "not served here" in str(err.value)
    assert embedders.unload("bert") is False  # busy
    embedders.release("bert", keep_alive_s=0)
    assert loader.made[0].closed and embedders.loaded() == [] and models.loaded() == []
