"""One line a command, from the parser itself: ``tasktrail demo [--db PATH] [--tasks N]``.

docs/commands.md's command list is this text (``tests/test_readme.py`` holds them equal),
so the options a reader sees there are the options ``tasktrail COMMAND --help`` accepts.
"""

from __future__ import annotations

import argparse

from . import build_parser


def _argument(action: argparse.Action) -> str:
    name = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    if not action.option_strings:  # a positional
        return f"[{name}]" if action.nargs == "?" else name
    flag = max(action.option_strings, key=len)
    text = flag if action.nargs == 0 else f"{flag} {name}"
    return text if action.required else f"[{text}]"


def synopsis() -> list[str]:
    """Each command's usage, in the order ``tasktrail --help`` lists them, without ``-h``:
    positionals first, then the options."""
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    lines = []
    for name, command in commands.choices.items():
        actions = [a for a in command._actions if not isinstance(a, argparse._HelpAction)]
        positionals = [_argument(a) for a in actions if not a.option_strings]
        options = [_argument(a) for a in actions if a.option_strings]
        lines.append(" ".join(["tasktrail", name, *positionals, *options]))
    return lines


if __name__ == "__main__":  # python -m tasktrail.replay.cli.synopsis: docs/commands.md's list
    print("\n".join(synopsis()))
