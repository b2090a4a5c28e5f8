"""A conversation case on the terminal, JUnit and Markdown (SPEC §16): the turns of a public
case that did not pass under its failure, each message inert whatever it holds; a passing
case's and a hidden case's turns on none of them."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

from rich.console import Console

from assay.grading import RunInfo, build_report, fold_case, fold_trial, redact
from assay.model import Case, Event, Report, SuiteRef, TargetRef, Trace, Verdict
from assay.reports import markdown
from assay.reports.common import TURNS_LISTED
from assay.reports.junit import junit_pieces
from assay.reports.terminal import print_report

INFO = RunInfo(run_id="r", suite=SuiteRef(id="t/talk@1", digest="sha256:0"),
               target=TargetRef(uri="openai:m", digest="sha256:1"), started_at="a",
               finished_at="b", trials_per_case=1, pass_mark=1.0)
CANARY = "CANARY-TALK-REPORT-91C"
#: Markup of every kind a surface could act on: HTML, Rich, an escape sequence, Markdown.
HOSTILE = ("<script>alert(1)</script> [bold red]loud[/] \x1b[31mred\x1b[0m "
           "| cell ![img](http://x/y.png) **bold**")
FAILED = Verdict(assertion="contains (turn 2)", check="contains", outcome="fail",
                 evidence="observed", note="does not contain \"10:00\"")
PASSED = Verdict(assertion="contains", check="contains", outcome="pass", evidence="observed")


def _talk(*turns: tuple[str, list[str], str | None]) -> Trace:
    events: list[Event] = []
    for n, (said, calls, reply) in enumerate(turns, start=1):
        events.append(Event(kind="user", text=said, turn=n))
        events += [Event(kind="tool_call", name=name, arguments={}, turn=n) for name in calls]
        if reply is not None:
            events.append(Event(kind="reply", result=reply, turn=n))
    return Trace(output=turns[-1][2], events=events)


def _case(case_id: str, trace: Trace, *, split: str = "public", failing: bool = True):
    case = Case(id=case_id, split=split, turns=["x"])  # type: ignore[arg-type]
    trial = fold_trial(1, [FAILED if failing else PASSED], trace=trace)
    return fold_case(case, [trial])


def _report() -> Report:
    public = _case("change-flight", _talk(("Move ABC123 to Friday. " + HOSTILE,
                                           ["update_booking"], "9am or 5pm? " + HOSTILE),
                                          ("9am.", [], None)))
    passing = _case("says-hello", _talk(("PASSING-USER hi", [], "PASSING-REPLY hello")),
                    failing=False)
    hidden = _case(f"{CANARY}-id", _talk((f"{CANARY} user", ["lookup"], f"{CANARY} reply")),
                   split="hidden")
    return redact(build_report(INFO, [public, passing, hidden]))


def _terminal(report: Report, *, colour: bool) -> str:
    out = io.StringIO()
    print_report(Console(file=out, width=200, highlight=False, force_terminal=colour,
                         color_system="truecolor" if colour else None), report)
    return out.getvalue()


def _junit(report: Report) -> str:
    """The XML ``--junit`` writes."""
    return b"".join(junit_pieces([report])).decode("utf-8")


def test_the_terminal_shows_a_failing_conversation_under_the_table_as_text() -> None:
    report = _report()
    text = _terminal(report, colour=False)
    assert "change-flight trial 1 (fail), the conversation:" in text
    lines = text.splitlines()
    at = lines.index("change-flight trial 1 (fail), the conversation:")
    assert lines[at + 1].startswith("  turn 1  user   Move ABC123 to Friday. <script>")
    assert lines[at + 2] == "          calls  update_booking"
    assert lines[at + 3].startswith("          agent  9am or 5pm? <script>alert(1)</script>")
    assert lines[at + 4] == "  turn 2  user   9am."
    assert lines[at + 5] == "          agent  (no reply)"
    # Rich markup is printed as written, an escape sequence as its visible picture.
    assert "[bold red]loud[/]" in lines[at + 1] and "␛[31mred" in lines[at + 1]
    assert "PASSING" not in text and CANARY not in text
    # On a colour terminal the agent's escape sequence still does nothing.
    coloured = _terminal(report, colour=True)
    assert "\x1b[31mred" not in coloured and "␛[31mred" in coloured


def test_junit_holds_the_conversation_in_the_failure_and_stays_well_formed() -> None:
    report = _report()
    text = _junit(report)
    parsed = ET.fromstring(text)
    [failure] = [c.find("failure") for c in parsed.iter("testcase")
                 if c.get("name") == "change-flight"]
    assert failure is not None and failure.text is not None
    body = failure.text.splitlines()
    assert body[2:] == [
        "  conversation:",
        "    turn 1   user: Move ABC123 to Friday. " + HOSTILE.replace("\x1b", "␛"),
        "             calls: update_booking",
        "             agent: 9am or 5pm? " + HOSTILE.replace("\x1b", "␛"),
        "    turn 2   user: 9am.",
        "             agent: (no reply)"]
    assert "<script>" not in text  # escaped in the file, text when read back
    assert "PASSING" not in text and CANARY not in text
    holdout = [c for c in parsed.iter("testcase") if c.get("name") == "holdout-1"]
    assert len(holdout) == 1 and list(holdout[0].iter())[1:] == [holdout[0].find("failure")]


def test_markdown_holds_the_conversation_as_a_table_whose_cells_stay_text() -> None:
    md = markdown([_report()])
    assert "**change-flight**, trial 1 (fail):" in md
    rows = md.split("**change-flight**, trial 1 (fail):", 1)[1].strip().splitlines()
    assert rows[:3] == ["| turn | who | said |", "|---|---|---|",
                        "| 1 | user | Move ABC123 to Friday. \\<script\\>alert(1)\\</script\\> "
                        "\\[bold red\\]loud\\[/\\] ␛\\[31mred␛\\[0m \\| cell "
                        "\\!\\[img\\](http://x/y.png) \\*\\*bold\\*\\* |"]
    assert rows[3] == "|  | calls | update\\_booking |"
    assert rows[5:7] == ["| 2 | user | 9am. |", "|  | agent | (no reply) |"]
    assert "PASSING" not in md and CANARY not in md


def test_a_long_conversation_lists_its_first_turns_and_counts_the_rest() -> None:
    many = [(f"message {n}", [], f"reply {n}") for n in range(1, TURNS_LISTED + 6)]
    report = redact(build_report(INFO, [_case("long", _talk(*many))]))
    line = "… 5 more turn(s); the JSON report has every turn"
    text, md = _terminal(report, colour=False), markdown([report])
    xml = _junit(report)
    for shown in (text, md, xml):
        assert f"message {TURNS_LISTED}" in shown and f"message {TURNS_LISTED + 1}" not in shown
        assert line in shown or line.replace("…", "&#8230;") in shown
    # The JSON report keeps every turn.
    [case] = report.to_json_dict()["cases"]
    assert len(case["trials"][0]["turns"]) == TURNS_LISTED + 5


def test_a_report_read_back_from_its_spool_shows_the_same_conversations() -> None:
    # A battery's (and a stored run's) cases are read back as asked for: only the public
    # cases that did not pass are read for their turns, with the same result.
    from assay.engine.spool import CaseSpool
    from assay.grading.report import tallied_report
    from assay.grading.tally import Tally
    from assay.model.result import KeptCases

    whole = _report()
    listed = [_case("change-flight", _talk(("Move ABC123 to Friday. " + HOSTILE,
                                            ["update_booking"], "9am or 5pm? " + HOSTILE),
                                           ("9am.", [], None))),
              _case("says-hello", _talk(("PASSING-USER hi", [], "PASSING-REPLY hello")),
                    failing=False),
              _case(f"{CANARY}-id", _talk((f"{CANARY} user", ["lookup"], f"{CANARY} reply")),
                    split="hidden")]
    spool = CaseSpool(len(listed))
    for index, case in enumerate(listed):
        spool.put(index, case)
    kept = redact(tallied_report(INFO, Tally.of(listed), spool))
    assert isinstance(kept.cases, KeptCases)
    assert _terminal(kept, colour=False) == _terminal(whole, colour=False)
    assert markdown([kept]) == markdown([whole])
    assert _junit(kept) == _junit(whole)
