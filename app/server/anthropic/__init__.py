"""Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) over the one engine
request the other APIs use.

request.py (with blocks.py, messages.py, tools.py) turns a body into a GenerationRequest: the
sampling fields through schema.py's one builder, tools onto ToolSpecs (tool_choice any/tool
enforced by the engine's tool-call grammar), content blocks onto ChatMessages. reply.py shapes
the engine's Finished event as a message; stream.py as the documented event stream, both through
the ReplySplitter the OpenAI routes use (thinking apart, tool calls parsed incrementally).
routes.py holds the endpoints; errors.py Anthropic's error shape.
"""
