"""Ember's own harmony chat template: for a gpt-oss model whose file carries none.

It follows the format's rules (OpenAI's harmony guide): a system message with the reasoning
effort (`reasoning_effort`: low, medium, high) and the valid channels, a developer message
with the instructions (a leading system turn) and the `functions` namespace, user turns,
assistant answers in the final channel, tool calls as commentary messages to=functions.NAME
ending in <|call|>, results from functions.NAME to=assistant. Past reasoning (`thinking`) is
shown again only for a turn that made tool calls and has no final answer after it; every other
turn's analysis is dropped. The generation prompt is `<|start|>assistant`: the model writes
its own channel.
"""

from __future__ import annotations

HARMONY_TEMPLATE = (
    "{%- set effort = reasoning_effort if reasoning_effort is defined else 'medium' -%}"
    "{%- set identity = model_identity if model_identity is defined else "
    "'You are ChatGPT, a large language model trained by OpenAI.' -%}"
    "{{- '<|start|>system<|message|>' ~ identity ~ '\\nKnowledge cutoff: 2024-06\\n\\n' -}}"
    "{{- 'Reasoning: ' ~ effort ~ '\\n\\n# Valid channels: analysis, commentary, final. ' -}}"
    "{{- 'Channel must be included for every message.' -}}"
    "{%- if tools -%}"
    "{{- \"\\nCalls to these tools must go to the commentary channel: 'functions'.\" -}}"
    "{%- endif -%}{{- '<|end|>' -}}"
    "{%- set ns = namespace(first=0, tool='', final_after=false) -%}"
    "{%- if messages and messages[0]['role'] == 'system' -%}{%- set ns.first = 1 -%}{%- endif -%}"
    "{%- if ns.first or tools -%}{{- '<|start|>developer<|message|>' -}}"
    "{%- if ns.first -%}{{- '# Instructions\\n\\n' ~ messages[0]['content'] ~ '\\n\\n' -}}"
    "{%- endif -%}"
    "{%- if tools -%}{{- '# Tools\\n\\n## functions\\n\\nnamespace functions {\\n\\n' -}}"
    "{%- for tool in tools -%}{%- set f = tool['function'] -%}"
    "{%- if f['description'] -%}{{- '// ' ~ f['description'] ~ '\\n' -}}{%- endif -%}"
    "{{- 'type ' ~ f['name'] ~ ' = (_: ' ~ (f['parameters'] | tojson) ~ ') => any;\\n\\n' -}}"
    "{%- endfor -%}{{- '} // namespace functions' -}}{%- endif -%}"
    "{{- '<|end|>' -}}{%- endif -%}"
    "{%- set turns = messages[ns.first:] -%}"
    "{%- for m in turns -%}"
    "{%- if m['role'] == 'user' -%}"
    "{{- '<|start|>user<|message|>' ~ m['content'] ~ '<|end|>' -}}"
    "{%- elif m['role'] == 'assistant' and m['tool_calls'] is defined and m['tool_calls'] -%}"
    "{%- set ns.final_after = false -%}"
    "{%- for later in turns[loop.index:] -%}"
    "{%- if later['role'] == 'assistant' and not (later['tool_calls'] is defined "
    "and later['tool_calls']) -%}{%- set ns.final_after = true -%}{%- endif -%}"
    "{%- endfor -%}"
    "{%- set analysis = m['thinking'] if m['thinking'] is defined and m['thinking'] "
    "else m['content'] -%}"
    "{%- if analysis and not ns.final_after -%}"
    "{{- '<|start|>assistant<|channel|>analysis<|message|>' ~ analysis ~ '<|end|>' -}}"
    "{%- endif -%}"
    "{%- for call in m['tool_calls'] -%}{%- set f = call['function'] -%}"
    "{%- set ns.tool = f['name'] -%}"
    "{{- '<|start|>assistant to=functions.' ~ f['name'] ~ '<|channel|>commentary json' -}}"
    "{{- '<|message|>' ~ (f['arguments'] | tojson) ~ '<|call|>' -}}"
    "{%- endfor -%}"
    "{%- elif m['role'] == 'assistant' -%}"
    "{{- '<|start|>assistant<|channel|>final<|message|>' ~ m['content'] ~ '<|end|>' -}}"
    "{%- elif m['role'] == 'tool' -%}"
    "{%- set name = m['name'] if m['name'] is defined and m['name'] else ns.tool -%}"
    "{{- '<|start|>functions.' ~ name ~ ' to=assistant<|channel|>commentary<|message|>' -}}"
    "{{- (m['content'] | tojson) ~ '<|end|>' -}}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|start|>assistant' -}}{%- endif -%}"
)


def is_harmony_architecture(arch: str) -> bool:
    """gpt-oss by its GGUF architecture ("gpt-oss") or Hugging Face model_type ("gpt_oss")."""
    return arch.lower().replace("_", "-") == "gpt-oss"
