"""Harmony, gpt-oss's chat format: replies as channel messages (reasoning, answer, tool calls).

reply = HarmonyReply(parse_tools=True)
reasoning, content, events = reply.feed(delta)     # ... then reply.finish()
    # events: CallStart, ArgsDelta, ToolCall (as models/text/tool_calls makes them)
HARMONY_TEMPLATE: Ember's own harmony chat template, for a gpt-oss file without one.
The tool format "harmony" (tool_calls/formats.py) names it; the forced-call grammar is in
tool_calls/grammar.py, the reasoning markers in models/text/reasoning_markers.py.
"""

from ember.models.text.harmony.reply import CallEvent, HarmonyReply, Header
from ember.models.text.harmony.template import HARMONY_TEMPLATE, is_harmony_architecture

__all__ = ["CallEvent", "HARMONY_TEMPLATE", "HarmonyReply", "Header", "is_harmony_architecture"]
