"""The llama-server utility routes, together for the route table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember.app.server.llamaserver import infill, metrics, text_routes

if TYPE_CHECKING:
    from starlette.routing import Route

    from ember.app.server.llamaserver.metrics import ServerMetrics
    from ember.app.server.pool import ModelPool
    from ember.app.server.security import Guard


def routes(pool: ModelPool, guard: Guard, server_metrics: ServerMetrics | None) -> list[Route]:
    return [
        *text_routes.routes(pool, guard),
        *infill.routes(pool, guard),
        *metrics.routes(pool, server_metrics),
    ]
