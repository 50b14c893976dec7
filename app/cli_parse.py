"""Argument parsing the way people type it: options anywhere around the positional arguments.

argparse's plain `parse_args` fills optional positionals in one pass, so in
`ember run MODEL --temperature 0 "Hello"` the prompt slot is already spent (empty) when "Hello"
comes: `unrecognized arguments`. `parse_intermixed_args` collects every positional first, but it
refuses parsers with sub-commands; `parse_anywhere` therefore walks down the sub-command levels
itself and parses the last level intermixed.
"""

from __future__ import annotations

import argparse


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def parse_anywhere(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse argv with options allowed before, between and after positionals, at every level."""
    sub = _subcommands(parser)
    if sub is None:
        return parser.parse_intermixed_args(argv)
    choices = sub.choices or {}
    at = next((i for i, arg in enumerate(argv) if arg in choices), None)
    if at is None:  # no sub-command named: help, --version, or argparse's own error
        return parser.parse_args(argv)
    required, sub.required = sub.required, False
    try:
        namespace = parser.parse_args(argv[:at])  # this level's own options
    finally:
        sub.required = required
    setattr(namespace, sub.dest, argv[at])
    child = parse_anywhere(choices[argv[at]], argv[at + 1 :])
    for name, value in vars(child).items():
        setattr(namespace, name, value)
    return namespace
