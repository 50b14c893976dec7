"""Property tests (hypothesis) of what an MCP server says about its tools: whatever the names,
descriptions and schemas, the toolbox offers only valid tool specs (a bad one is reported, not
raised), each tool's allow-list key is its own server's, nothing in the metadata is ever
allowed, and the consent dialog's text of it is plain: no control character reaches the
terminal and its length is bounded."""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from ember.app.mcp.consent import ALLOW_KEY, is_allowed, tool_key
from ember.app.mcp.hub import McpHub, McpTool, _offered_name
from ember.text import has_controls
from ember.tui.screens.tool_consent import MAX_DESCRIPTION_CHARS, clipped
from ember.tui.toolbox import McpToolbox
from tests.fuzz import FUZZ, nasty_text

schemas = st.one_of(
    st.none(),
    st.dictionaries(nasty_text, st.one_of(st.integers(), nasty_text), max_size=3),
    st.just({"type": "object", "properties": {"x": {"$ref": "#"}}, "required": ["x"]}),
)
descriptions = st.one_of(
    nasty_text, st.builds(lambda t, n: t * n, nasty_text, st.integers(0, 5000))
)
tools = st.lists(
    st.tuples(st.sampled_from(["calc", "evil", "a-b"]), nasty_text, descriptions, schemas),
    max_size=6,
)


class _ListedHub:
    """The part of McpHub the toolbox reads, holding tools as a server listed them (the names
    made unique the way McpHub._connect makes them)."""

    def __init__(self, listed: list[tuple[str, str, str, Any]]) -> None:
        self.errors: dict[str, str] = {}
        taken: dict[str, McpTool] = {}
        for server, name, description, schema in listed:
            offered = _offered_name(name, server, taken)
            taken[offered] = McpTool(offered, server, name, description, schema or {})
        self._tools = list(taken.values())

    def tools(self) -> list[McpTool]:
        return list(self._tools)


@FUZZ
@given(listed=tools, allowed=st.lists(nasty_text, max_size=3))
def test_tool_metadata_is_offered_safely_and_grants_nothing(
    listed: list[tuple[str, str, str, Any]], allowed: list[str]
) -> None:
    hub = _ListedHub(listed)
    box = McpToolbox(cast(McpHub, hub))
    specs = box.specs()  # never raises: a tool the engine cannot take is reported
    assert len(specs) + len(set(box.errors)) >= min(1, len(hub.tools()))
    for spec in specs:
        assert 0 < len(spec.name) <= 64
        assert all(c.isalnum() or c in "_-." for c in spec.name)
        tool = next(t for t in hub.tools() if t.name == spec.name)
        assert box.key_of(spec.name) == tool_key(tool.server, tool.remote_name)
        # the same tool name on another server is another tool: its entry grants nothing here
        others = [
            tool_key(s, tool.remote_name) for s in ("calc", "evil", "a-b") if s != tool.server
        ]
        assert not is_allowed(
            {ALLOW_KEY: [*others, spec.name, *allowed]}, box.key_of(spec.name)
        ) or (box.key_of(spec.name) in allowed)
        shown = clipped(box.description_of(spec.name), MAX_DESCRIPTION_CHARS)
        assert not has_controls(shown.replace("\n", "").replace("\t", ""))
        assert len(shown) <= MAX_DESCRIPTION_CHARS + 1
