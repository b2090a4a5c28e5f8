"""``invocation`` when a suite loads (SPEC §2): the bare word stays a label, ``{mode,
skill}`` names a skill the case's workspace must hold, and ``none`` forbids it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from assay.errors import SuiteError
from assay.model import Invocation
from assay.suites import LoadedSuite, load_suite_file

from .conftest import Write

SKILL = "---\nname: greet\ndescription: Greets in the house style.\n---\n\nSay HELLO.\n"

Refused = Callable[..., SuiteError]
LineOf = Callable[..., int]


def suite(write: Write, *case_lines: str, top: str = "workspace: ws\n",
          skill_at: str | None = ".claude/skills/greet/SKILL.md", body: str = SKILL) -> Path:
    if skill_at is not None:
        write(f"ws/{skill_at}", body)
    write("ws/readme.txt", "a project\n")
    cases = "".join(f"    {line}\n" for line in case_lines)
    return write("s.suite.yaml", f"suite: t/inv@1\ntarget: claude\n{top}cases:\n"
                                 f"  - id: one\n    input: Greet Ada.\n{cases}")


def _checks(loaded: LoadedSuite) -> list[tuple[str, object]]:
    return [(a.check, a.arg) for a in loaded.suite.cases[0].expect]


def test_the_bare_word_stays_the_label_and_facet_it_was(write: Write, load) -> None:
    for word in ("automatic", "explicit", "none"):
        path = suite(write, f"invocation: {word}", skill_at=None)
        loaded = load(path)
        case = loaded.suite.cases[0]
        assert case.invocation == word
        assert loaded.case_facets(case)["invocation"] == word
        # A label forbids nothing: no check is added for a bare none.
        assert case.expect == []


def test_a_mode_without_a_skill_is_the_bare_word(write: Write, load) -> None:
    bare = load(suite(write, "invocation: explicit", skill_at=None))
    mapped = load(suite(write, "invocation: {mode: explicit}", skill_at=None))
    assert mapped.suite.cases[0].invocation == "explicit"
    # The same case: the same suite digest, the same facets, so runs still align.
    assert mapped.digest == bare.digest
    assert mapped.case_facets(mapped.suite.cases[0]) == bare.case_facets(bare.suite.cases[0])


def test_a_named_skill_is_part_of_the_facet(write: Write, load) -> None:
    loaded = load(suite(write, "invocation: {mode: explicit, skill: greet}"))
    case = loaded.suite.cases[0]
    assert case.invocation == Invocation(mode="explicit", skill="greet")
    assert loaded.case_facets(case)["invocation"] == "explicit:greet"
    assert _checks(loaded) == []
    (use,) = loaded.skill_uses
    assert (use.hosts, use.found) == (frozenset({"claude"}), (".claude/skills/greet/SKILL.md",))


def test_none_gives_the_case_a_never_activates_skill_check(write: Write, load,
                                                          line_of: LineOf) -> None:
    path = suite(write, "invocation: {mode: none, skill: greet}", "expect:", "  - status: ok")
    loaded = load(path)
    assert _checks(loaded) == [("status", "ok"), ("never_activates_skill", ["greet"])]
    implied = loaded.suite.cases[0].expect[1]
    assert (implied.file, implied.line) == (str(path), line_of(path, "- id: one"))


@pytest.mark.parametrize("listed", ["greet", "[other, greet]", "gr*"])
def test_none_adds_no_second_check_when_the_case_forbids_the_skill_already(
        write: Write, load, listed: str) -> None:
    loaded = load(suite(write, "invocation: {mode: none, skill: greet}", "expect:",
                        f"  - never_activates_skill: {listed}"))
    assert [c for c, _ in _checks(loaded)] == ["never_activates_skill"]


def test_none_adds_its_check_when_the_case_forbids_another_skill(write: Write, load) -> None:
    loaded = load(suite(write, "invocation: {mode: none, skill: greet}", "expect:",
                        "  - never_activates_skill: farewell"))
    assert _checks(loaded) == [("never_activates_skill", ["farewell"]),
                               ("never_activates_skill", ["greet"])]


def test_the_skill_may_be_where_codex_looks(write: Write, load) -> None:
    for where in (".agents/skills/greet/SKILL.md", ".codex/skills/greet/SKILL.md"):
        loaded = load(suite(write, "invocation: {mode: automatic, skill: greet}",
                            skill_at=where))
        (use,) = loaded.skill_uses
        assert use.hosts == frozenset({"codex"}) and where in use.found


def test_a_case_of_its_own_workspace_looks_there(write: Write, load) -> None:
    write("mine/.agents/skills/greet/SKILL.md", SKILL)
    loaded = load(suite(write, "workspace: mine", "invocation: {mode: none, skill: greet}",
                        skill_at=None))
    (use,) = loaded.skill_uses
    assert use.found == (".agents/skills/greet/SKILL.md",)


@pytest.mark.parametrize(("line", "needle", "message"), [
    ("invocation: {mode: sometimes, skill: greet}", "invocation",
     "invocation: mode 'sometimes' is not a mode: automatic, explicit or none"),
    ("invocation: {skill: greet}", "invocation",
     "invocation: has no mode: automatic, explicit or none"),
    ("invocation: {mode: explicit, skil: greet}", "invocation",
     "invocation: unknown key 'skil' (an invocation has mode and skill)"),
    ("invocation: {mode: explicit, skill: ../greet}", "invocation",
     "invocation: skill '../greet' is not a skill's name"),
    ("invocation: {mode: explicit, skill: [greet]}", "invocation",
     "invocation: skill ['greet'] is not a skill's name"),
    ("invocation: [explicit, greet]", "invocation",
     "invocation: is automatic, explicit or none, or {mode, skill}, not list"),
])
def test_a_malformed_invocation_is_refused_at_its_line(write: Write, refused: Refused,
                                                       line_of: LineOf, line: str,
                                                       needle: str, message: str) -> None:
    path = suite(write, line)
    err = refused(path)
    assert (err.file, err.line) == (str(path), line_of(path, needle))
    assert err.message.startswith(message), err.message


def test_a_skill_the_workspace_does_not_hold_is_refused(write: Write, refused: Refused,
                                                       line_of: LineOf) -> None:
    path = suite(write, "invocation: {mode: none, skill: gret}")
    err = refused(path)
    assert (err.file, err.line) == (str(path), line_of(path, "- id: one"))
    assert err.message == (
        "case 'one': invocation: skill 'gret' is not in the workspace ws/: looked for "
        ".claude/skills/gret/SKILL.md, .agents/skills/gret/SKILL.md, "
        ".codex/skills/gret/SKILL.md")


def test_a_skill_named_by_a_case_without_a_workspace_is_refused(write: Write,
                                                                refused: Refused) -> None:
    err = refused(suite(write, "invocation: {mode: explicit, skill: greet}", top=""))
    assert err.message.startswith("case 'one': invocation: skill 'greet' is named, and the "
                                  "case has no workspace to hold it: give it (or the suite) "
                                  "workspace: DIR"), err.message


def test_a_skill_whose_front_matter_names_it_otherwise_is_refused(write: Write,
                                                                  refused: Refused) -> None:
    err = refused(suite(write, "invocation: {mode: explicit, skill: greet}",
                        skill_at=".agents/skills/greet/SKILL.md",
                        body=SKILL.replace("name: greet", "name: hello")))
    assert "names it 'hello' in its front matter" in err.message, err.message


@pytest.mark.parametrize(("text", "written"), [
    ("/greet Greet Ada.", "/greet"), ("Please $greet Ada.", "$greet"),
])
@pytest.mark.parametrize("mode", ["automatic", "explicit", "none"])
def test_an_input_that_invokes_the_skill_itself_is_refused(
        write: Write, refused: Refused, line_of: LineOf, text: str, written: str,
        mode: str) -> None:
    path = suite(write, f"invocation: {{mode: {mode}, skill: greet}}")
    path.write_text(path.read_text().replace("input: Greet Ada.", f"input: {text}"))
    err = refused(path)
    assert err.line == line_of(path, "input:")
    assert err.message.startswith(f"the input invokes skill 'greet' itself ({written})")


@pytest.mark.parametrize("text", ["Greet /greet", "Say $greeting", "costs $5 greet",
                                  "Greet Ada."])
def test_an_input_that_only_names_words_alike_is_fine(write: Write, load, text: str) -> None:
    path = suite(write, "invocation: {mode: automatic, skill: greet}")
    path.write_text(path.read_text().replace("input: Greet Ada.", f"input: {text}"))
    assert load(path).suite.cases[0].input == text


def test_none_and_activates_skill_of_the_same_skill_is_refused(write: Write, refused: Refused,
                                                              line_of: LineOf) -> None:
    path = suite(write, "invocation: {mode: none, skill: greet}", "expect:",
                 "  - activates_skill: gree*")
    err = refused(path)
    assert err.line == line_of(path, "activates_skill")
    assert err.message.startswith("activates_skill gree* can never pass")


def test_a_hidden_case_s_bad_skill_is_refused_without_its_content(write: Write,
                                                                  refused: Refused) -> None:
    path = suite(write, top="workspace: ws\nhidden: hidden\n")
    write("hidden/h.yaml", "id: CANARY-id\ninput: CANARY-in\n"
                           "invocation: {mode: explicit, skill: CANARY-skill}\n")
    err = refused(path)
    assert "CANARY" not in str(err) and "withheld" in err.message, str(err)


def test_a_python_suite_takes_the_mapping_and_its_errors(write: Write, load,
                                                         refused: Refused,
                                                         line_of: LineOf) -> None:
    write("ws/.claude/skills/greet/SKILL.md", SKILL)
    path = write("inv_eval.py", """
        from assay import Case, Suite

        suite = Suite(suite="t/py@1", target="claude", workspace="ws", cases=[
            Case(id="one", input="Greet Ada.",
                 invocation={"mode": "none", "skill": "greet"}),
        ])
        """)
    assert _checks(load(path)) == [("never_activates_skill", ["greet"])]
    path.write_text(path.read_text().replace('"skill": "greet"', '"skill": "gret"'))
    err = refused(path)
    assert err.line == line_of(path, 'Case(id="one"')
    assert "skill 'gret' is not in the workspace ws/" in err.message


def test_a_suite_loaded_again_from_the_parse_cache_is_the_same(
        write: Write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".assay").mkdir()
    path = suite(write, "invocation: {mode: none, skill: greet}")
    first, again = load_suite_file(path), load_suite_file(path)
    assert list((tmp_path / ".assay").rglob("*.json")), "the second load was not from the cache"
    assert again.digest == first.digest
    assert _checks(again) == _checks(first) == [("never_activates_skill", ["greet"])]
    assert again.suite.cases[0].invocation == Invocation(mode="none", skill="greet")
