"""A draft case as YAML a person pastes into a suite: plain block text, with every
character that could act on a terminal or hide text escaped, and notes as comments."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    """Lists indented under their key, as assay's own suites are written."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # Text of several lines as a literal block; the emitter quotes it instead where a
    # block cannot hold it exactly (trailing spaces, control characters).
    return dumper.represent_scalar("tag:yaml.org,2002:str", value,
                                   style="|" if "\n" in value else None)


_Dumper.add_representer(str, _text)

#: Characters that are not shown as themselves (C0 and C1 controls, line and paragraph
#: separators, bidi controls, a byte-order mark): with any of them the text is written
#: in ASCII with escapes, which reads back the same and acts on no terminal.
_HIDDEN_ACTS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e"
                          "\u2066-\u2069\ufeff\ud800-\udfff]")


def yaml_text(data: Any) -> str:
    """``data`` as block YAML that reads back to ``data`` and is safe to print.

    Written with its own characters where it can be; otherwise in ASCII with
    escapes. Either is read back and compared before it is returned.
    """
    for readable in (True, False):
        text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=readable,
                         width=100, default_flow_style=False)
        if readable and _HIDDEN_ACTS.search(text):
            continue
        try:
            if yaml.safe_load(text) == data:
                return text
        except yaml.YAMLError:
            pass
    raise ValueError("the draft cannot be written as YAML that reads back the same")


def comment_lines(notes: Iterable[str]) -> str:
    """Each note as a ``#`` line; anything that would end a comment early is shown as ``?``."""
    return "".join(f"# {_HIDDEN_ACTS.sub('?', note.replace(chr(10), ' '))}\n" for note in notes)
