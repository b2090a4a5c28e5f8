"""Hostile text an agent or a suite author may hand assay: one place, for every surface's tests.

An outward surface (the terminal, a report file, a web page) is tested by
putting this corpus through it and checking what comes out with
:func:`assert_inert`. Import it from a test with ``from ..fuzz_corpus import …``
(tests/ is a rootdir-relative package under pytest's importlib mode).
"""

from __future__ import annotations

from typing import Any

#: Rich markup, balanced and not; each would be parsed (or crash Rich) if shown as markup.
MARKUP = {
    "inst": "[/INST]",
    "bold": "[bold]loud[/bold]",
    "link": "[link=http://evil.example]click[/link]",
    "close": "[/]",
    "unbalanced": "[/nope] [red",
    "emoji": ":warning: :pile_of_poo:",
}
#: Terminal escape sequences: colour, OSC 8 hyperlink, window title, clear screen.
ANSI = {
    "csi": "\x1b[31mred\x1b[0m",
    "osc8": "\x1b]8;;http://evil.example\x1b\\hyperlink\x1b]8;;\x1b\\",
    "title": "\x1b]0;pwned\x07",
    "clear": "\x1b[2J\x1b[H",
}
#: Control characters: NUL, bell, backspace, carriage return, DEL and a C1 CSI.
CONTROLS = {
    "nul": "a\x00b",
    "bell": "ding\x07",
    "backspace": "abc\x08\x08\x08",
    "cr": "shown\rHIDDEN",
    "del": "x\x7fy",
    "c1": "\x9b31mc1",
    "vt_ff": "\x0b\x0c",
}
#: Text no UTF-8 encoder accepts.
SURROGATES = {"high": "lone\ud800high", "low": "lone\udfffl"}
#: Things a Markdown or HTML page would act on, and a bidi override that reorders a line.
PAGES = {
    "html": "<script>alert(1)</script><img src=x onerror=alert(2)>",
    "table": "| fake | row |\n|---|---|",
    "image": "![t](http://tracker.example/p.png) [l](javascript:alert(1))",
    "code": "``` `x` ```",
    "bidi": "\u202eevil\u202c",
}

CORPUS = {**MARKUP, **ANSI, **CONTROLS, **SURROGATES, **PAGES}
#: Every entry in one string.
HOSTILE = " ".join(CORPUS.values())
#: The same without lone surrogates: what a YAML suite file (UTF-8 text) can hold.
HOSTILE_ENCODABLE = " ".join(v for k, v in CORPUS.items() if k not in SURROGATES)
#: The hostile text a case id may hold (printable, at most 200 characters): markup, HTML, bidi.
NAME = " ".join([*MARKUP.values(), PAGES["html"], PAGES["bidi"]])
#: About a megabyte of output, with markup at both ends.
MEGABYTE = "[bold]" + "x" * 1_000_000 + "[/INST]"
#: Invalid UTF-8, as a subprocess or an HTTP server may send it.
INVALID_UTF8 = b'{"out": "caf\xe9 \xff\xfe \xc3"}'

#: Characters that must never reach a terminal or a report raw.
FORBIDDEN = frozenset(
    [chr(c) for c in range(0x20) if c not in (0x09, 0x0A)]
    + ["\x7f", *map(chr, range(0x80, 0xA0)), "\u202e", "\u202c"]
)


def nested(depth: int, leaf: Any = "leaf") -> Any:
    """``{"a": {"a": … leaf}}``, ``depth`` objects deep (no recursion to build it)."""
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def assert_inert(text: str, where: str = "output") -> None:
    """``text`` holds no raw control character, escape, bidi override or lone surrogate."""
    raw = sorted({f"U+{ord(c):04X}" for c in text
                  if c in FORBIDDEN or 0xD800 <= ord(c) <= 0xDFFF})
    assert not raw, f"{where} carries raw {', '.join(raw)}"


def python_source() -> str:
    """This corpus as Python source, for an agent module written into a test's folder."""
    lines = [f"{name} = {value!r}" for name, value in (
        ("HOSTILE", HOSTILE), ("HOSTILE_ENCODABLE", HOSTILE_ENCODABLE))]
    lines.append("MEGABYTE = '[bold]' + 'x' * 1_000_000 + '[/INST]'")
    lines.append("def nested(depth, leaf='leaf'):\n    value = leaf\n"
                 "    for _ in range(depth):\n        value = {'a': value}\n    return value")
    return "\n".join(lines) + "\n"
