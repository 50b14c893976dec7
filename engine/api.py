"""The engine's public contract, gathered in one import: requests and sampling parameters
(engine/request.py), stream events and handles (engine/events.py), load options and model files
(engine/options.py), and the Backend protocol with what it reports (engine/backend.py).

Everything outside the engine (CLI, TUI, server) talks to it through these types only; the TUI
imports nothing else of the engine. No torch here and no implementation: `Engine` and
`EngineThread` live in engine/engine.py and engine/engine_thread.py and are created through
engine/load.py's `load_engine()`, which imports this module, never the other way round.
"""

from __future__ import annotations

from ember.engine.backend import Backend, EngineInfo, Health, HealthStatus
from ember.engine.errors import EngineError
from ember.engine.events import (
    Event,
    EventStream,
    Finished,
    FinishReason,
    RequestHandle,
    Stats,
    TextDelta,
    TokenLogprob,
    TopLogprob,
)
from ember.engine.options import AUTO_CTX, EngineOptions, ModelFiles, ModelFormat, Progress
from ember.engine.request import (
    DRY_BREAKERS,
    MAX_CONSTRAINT_CHARS,
    MAX_SEED,
    MAX_TOP_LOGPROBS,
    RESERVED_TEMPLATE_VARS,
    ChatMessage,
    ConstraintKind,
    ConstraintSpec,
    GenerationRequest,
    Role,
    SamplingParams,
    ToolSpec,
)
from ember.models.text.tool_calls.calls import ToolCall  # ChatMessage.tool_calls holds them

__all__ = [
    "AUTO_CTX",
    "DRY_BREAKERS",
    "MAX_CONSTRAINT_CHARS",
    "MAX_SEED",
    "MAX_TOP_LOGPROBS",
    "RESERVED_TEMPLATE_VARS",
    "Backend",
    "ChatMessage",
    "ConstraintKind",
    "ConstraintSpec",
    "EngineError",
    "EngineInfo",
    "EngineOptions",
    "Event",
    "EventStream",
    "FinishReason",
    "Finished",
    "GenerationRequest",
    "Health",
    "HealthStatus",
    "ModelFiles",
    "ModelFormat",
    "Progress",
    "RequestHandle",
    "Role",
    "SamplingParams",
    "Stats",
    "TextDelta",
    "TokenLogprob",
    "ToolCall",
    "ToolSpec",
    "TopLogprob",
]
