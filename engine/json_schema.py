"""Client JSON schemas checked and bounded before llguidance compiles them (constraint.py).

Checked, each a one-line EngineError instead of a compiler's internal state, a RecursionError
or a request that never ends:
- nesting deeper than MAX_DEPTH and more than MAX_NODES subschemas (walked without recursion);
- a `$ref` that is not local (`#...`) or points nowhere;
- recursion without end: a cycle of subschemas each of which must appear in the one before
  (`{"$ref": "#"}`, or a property that refers back to its object and is `required`);
- regex `pattern`s longer than MAX_PATTERN_CHARS or with a repeat count over MAX_REPEAT.

Bounded, so a constrained reply closes within a normal budget (issue 23 part 7): an `integer` or
`number` without its own minimum/maximum gets one of INTEGRAL_DIGITS digits (llama.cpp's
converter allows 16), so a small model cannot write 1000000000... until max_tokens. Whitespace
is bounded by constraint.JSON_DEFAULTS; `maxLength` / `maxItems` are enforced by llguidance.
"""

from __future__ import annotations

import re
from typing import Any

from ember.engine.errors import EngineError

MAX_DEPTH = 64
MAX_NODES = 20_000
MAX_PATTERN_CHARS = 2_000
MAX_REPEAT = 1_000
INTEGRAL_DIGITS = 16
# 10**16 - 2: the largest 16-digit bound a float64 holds exactly (llguidance reads bounds as
# f64, where 10**16 - 1 rounds up to 10**16 and would let a 17th digit through)
_BOUND = 10**INTEGRAL_DIGITS - 2
_NUMERIC_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_REPEAT = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")


def prepare_schema(schema: Any, what: str = "constraint json_schema") -> Any:
    """A checked copy of schema with numbers bounded; EngineError (naming `what`) if refused."""
    nodes = _walk(schema, what)
    _refuse_endless_recursion(schema, nodes, what)
    return _bounded(schema)


def _walk(schema: Any, what: str) -> dict[str, dict[str, Any]]:
    """JSON pointer -> subschema (dicts only), checking depth, size and patterns iteratively."""
    nodes: dict[str, dict[str, Any]] = {}
    stack: list[tuple[str, Any, int]] = [("", schema, 0)]
    while stack:
        pointer, value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise EngineError(f"{what}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            nodes[pointer] = value
            if len(nodes) > MAX_NODES:
                raise EngineError(f"{what}: more than {MAX_NODES} subschemas")
            if "pattern" in value:
                _check_pattern(value["pattern"], what)
            stack += [(f"{pointer}/{_escape(str(k))}", v, depth + 1) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(f"{pointer}/{i}", v, depth + 1) for i, v in enumerate(value)]
    return nodes


def _check_pattern(pattern: Any, what: str) -> None:
    if not isinstance(pattern, str):
        raise EngineError(f"{what}: a pattern must be a string")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise EngineError(f"{what}: a pattern longer than {MAX_PATTERN_CHARS} characters")
    check_repeats(pattern, what)


def check_repeats(pattern: str, what: str) -> None:
    """Repeat counts in a regex or grammar (a{1000000} would build a huge automaton)."""
    for low, high in _REPEAT.findall(pattern):
        if int(low) > MAX_REPEAT or (high and int(high) > MAX_REPEAT):
            raise EngineError(f"{what}: a pattern repeat count over {MAX_REPEAT}")


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _forced(pointer: str, node: dict[str, Any], what: str) -> list[str]:
    """The subschemas that must appear wherever node does (where a value of node recurses)."""
    out = []
    ref = node.get("$ref")
    if isinstance(ref, str):
        if not ref.startswith("#"):
            raise EngineError(f"{what}: only local $ref (#...) is supported, not {ref[:80]!r}")
        out.append(ref[1:])
    all_of = node.get("allOf")
    if isinstance(all_of, list):
        out += [f"{pointer}/allOf/{i}" for i in range(len(all_of))]
    required = node.get("required")
    properties = node.get("properties")
    if isinstance(required, list) and isinstance(properties, dict):
        out += [f"{pointer}/properties/{_escape(k)}" for k in required if k in properties]
    min_items = node.get("minItems")
    if isinstance(min_items, int) and min_items > 0 and isinstance(node.get("items"), dict):
        out.append(f"{pointer}/items")
    return out


def _refuse_endless_recursion(schema: Any, nodes: dict[str, dict[str, Any]], what: str) -> None:
    """A cycle of forced subschemas has no finite instance: refuse it (iterative DFS)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in nodes:
        if state.get(root):
            continue
        stack = [(root, iter(_forced(root, nodes[root], what)))]
        state[root] = 1
        while stack:
            pointer, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[pointer] = 2
                stack.pop()
                continue
            if child not in nodes:
                if _resolve(schema, child) is None:
                    raise EngineError(f"{what}: $ref '#{child[:80]}' points nowhere")
                continue  # a boolean schema or a list: nothing forced below it
            if state.get(child) == 1:
                where = f"'#{child}'" if child else "'#' (the root)"
                raise EngineError(f"{what}: recurses without end through {where[:90]}")
            if not state.get(child):
                state[child] = 1
                stack.append((child, iter(_forced(child, nodes[child], what))))


def _resolve(schema: Any, pointer: str) -> Any:
    value = schema
    for part in pointer.split("/")[1:]:
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return None
    return value


def _bounded(value: Any) -> Any:
    """A copy with every unbounded integer/number given INTEGRAL_DIGITS digits (depth is
    already checked, so plain recursion is safe here)."""
    if isinstance(value, list):
        return [_bounded(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: _bounded(v) for k, v in value.items()}
    kinds = out.get("type")
    numeric = kinds in ("integer", "number") or (
        isinstance(kinds, list) and bool({"integer", "number"} & set(map(str, kinds)))
    )
    if numeric and "enum" not in out and "const" not in out:
        if not any(k in out for k in ("minimum", "exclusiveMinimum")):
            out["minimum"] = -_BOUND
        if not any(k in out for k in ("maximum", "exclusiveMaximum")):
            out["maximum"] = _BOUND
    return out
