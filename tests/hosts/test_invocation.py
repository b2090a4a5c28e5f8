"""``invocation: {mode, skill}`` with the real host CLIs (SPEC §2), as a user runs it.

A workspace holds a skill folder; ``assay run`` runs the suite on the real
Claude Code or Codex against a scripted model, and the request the model
received shows what the host was asked: ``explicit`` is the host's own
invocation (Claude Code's slash command, which the CLI expands into the
skill's text; Codex's ``$NAME`` mention, after which the CLI puts the
skill's ``SKILL.md`` in the conversation); ``automatic`` is the prompt as
written, the skill only listed by the host itself; ``none`` gives the case a
``never_activates_skill`` verdict, which passes while the model leaves the
skill alone and fails when it uses it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic_stub import tool
from hostlib import Host
from openai_stub import call

pytestmark = pytest.mark.real

PROMPT = "Greet Ada."


def skill_md(name: str) -> str:
    return (f"---\nname: {name}\ndescription: Greets people in the house style. Use when "
            f"asked to greet someone.\n---\n\nAnswer with HOUSE-GREETING-{name} and nothing "
            "else.\n")


def _suite(host: Host, target: str, invocation: str, *, expect: str = "") -> None:
    (host.root / "greet.suite.yaml").write_text(f"""\
suite: hosts/invocation@1
target: {json.dumps(target)}
workspace: proj
cases:
  - id: greets
    input: {PROMPT}
    invocation: {invocation}
    expect:
      - status: ok
{expect}""")


def _run(host: Host, name: str = "out.json") -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    done = host.assay_run(".", "--no-store", "--json", name)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode in (0, 1), done.stdout + done.stderr
    (case,) = json.loads((host.root / name).read_text())["cases"]
    (trial,) = case["trials"]
    return done.returncode, case, trial["verdicts"]


def _verdict(verdicts: list[dict[str, Any]], check: str) -> dict[str, Any]:
    (found,) = [v for v in verdicts if v["check"] == check]
    return found


# --- Claude Code ---------------------------------------------------------------------


def _claude_user_texts(host: Host) -> list[str]:
    """The text blocks of the user's turn in the first model call: what the CLI made of
    the prompt, before the model did anything."""
    (turn,) = [m for m in host.stub.model_calls()[0]["messages"] if m["role"] == "user"]
    return [b["text"] for b in turn["content"] if b.get("type") == "text"]


def _claude_project(host: Host) -> None:
    host.folder("proj", {".claude/skills/greet/SKILL.md": skill_md("greet"),
                         ".claude/skills/farewell/SKILL.md": skill_md("farewell")})


def test_claude_explicit_runs_the_skills_slash_command(claude: Host) -> None:
    _claude_project(claude)
    _suite(claude, "claude", "{mode: explicit, skill: greet}",
           expect="      - activates_skill: greet\n")
    claude.stub.reply("HOUSE-GREETING-greet")
    code, case, verdicts = _run(claude)

    assert code == 0, verdicts
    texts = _claude_user_texts(claude)
    # The CLI was given /greet and the prompt: it expanded the skill itself, with the
    # prompt as the command's arguments, before the model ran.
    assert any("<command-name>/greet</command-name>" in t for t in texts), texts
    assert any(f"<command-args>{PROMPT}</command-args>" in t for t in texts), texts
    assert any("HOUSE-GREETING-greet" in t for t in texts), texts
    assert not any("HOUSE-GREETING-farewell" in t for t in texts)
    # The stream does not say so: the skill is inferred from the slash command.
    activated = _verdict(verdicts, "activates_skill")
    assert (activated["outcome"], activated["evidence"]) == ("pass", "inferred")
    assert case["facets"]["invocation"] == "explicit:greet"


def test_claude_automatic_sends_the_prompt_as_written(claude: Host) -> None:
    _claude_project(claude)
    _suite(claude, "claude", "{mode: automatic, skill: greet}",
           expect="      - activates_skill: greet\n")
    # The model comes to the skill on its own, through the CLI's Skill tool.
    claude.stub.reply([tool("Skill", "t1", skill="greet")], "HOUSE-GREETING-greet")
    code, case, verdicts = _run(claude)

    assert code == 0, verdicts
    texts = _claude_user_texts(claude)
    assert PROMPT in texts
    assert not any("/greet" in t or "<command-name>" in t for t in texts), texts
    # No hint in the prompt: the skill's name reached the model only in the CLI's own list.
    prompt_turn = next(t for t in texts if PROMPT in t)
    assert "greet" not in prompt_turn.replace(PROMPT, "")
    activated = _verdict(verdicts, "activates_skill")
    assert (activated["outcome"], activated["evidence"]) == ("pass", "observed")
    assert case["facets"]["invocation"] == "automatic:greet"


def test_claude_none_forbids_the_skill(claude: Host) -> None:
    _claude_project(claude)
    _suite(claude, "claude", "{mode: none, skill: greet}")
    claude.stub.reply("Hello, Ada.")
    code, _, verdicts = _run(claude, "left-alone.json")
    assert code == 0, verdicts
    kept = _verdict(verdicts, "never_activates_skill")
    assert (kept["outcome"], kept["evidence"]) == ("pass", "observed")
    assert not any("<command-name>" in t for t in _claude_user_texts(claude))

    claude.stub.reply([tool("Skill", "t1", skill="greet")], "HOUSE-GREETING-greet")
    code, _, verdicts = _run(claude, "used.json")
    assert code == 1, verdicts
    breached = _verdict(verdicts, "never_activates_skill")
    assert breached["outcome"] == "fail" and breached["note"].startswith("activated greet")


# --- Codex ---------------------------------------------------------------------------


def _codex_user_texts(host: Host) -> list[str]:
    """The text of each user message of the first model call, in order."""
    body = host.stub.model_calls()[0]
    return [block["text"] for item in body["input"]
            if item.get("type") == "message" and item.get("role") == "user"
            for block in item["content"] if block.get("type") == "input_text"]


def _codex_project(host: Host) -> None:
    host.folder("proj", {".agents/skills/greet/SKILL.md": skill_md("greet"),
                         ".agents/skills/farewell/SKILL.md": skill_md("farewell")})


def test_codex_explicit_mentions_the_skill(codex: Host) -> None:
    _codex_project(codex)
    _suite(codex, codex.codex_uri(), "{mode: explicit, skill: greet}",
           expect="      - activates_skill: greet\n")
    codex.stub.reply("HOUSE-GREETING-greet")
    code, case, verdicts = _run(codex)

    assert code == 0, verdicts
    texts = _codex_user_texts(codex)
    assert f"$greet {PROMPT}" in texts, texts
    # Codex answered the mention itself: the skill's SKILL.md follows the prompt.
    given = texts[texts.index(f"$greet {PROMPT}") + 1]
    assert given.startswith("<skill>\n<name>greet</name>") and "HOUSE-GREETING-greet" in given
    assert not any("HOUSE-GREETING-farewell" in t for t in texts)
    # Read from the session record, where Codex put it: inferred, as Codex's skills are.
    activated = _verdict(verdicts, "activates_skill")
    assert (activated["outcome"], activated["evidence"]) == ("pass", "inferred")
    assert case["facets"]["invocation"] == "explicit:greet"


def test_codex_automatic_sends_the_prompt_as_written(codex: Host) -> None:
    _codex_project(codex)
    _suite(codex, codex.codex_uri(), "{mode: automatic, skill: greet}")
    codex.stub.reply("Hello, Ada.")
    code, case, verdicts = _run(codex)

    assert code == 0, verdicts
    texts = _codex_user_texts(codex)
    assert PROMPT in texts
    assert not any("$greet" in t or t.startswith("<skill>") for t in texts), texts
    # The skill is there for the model to choose: Codex lists it, in its own instructions.
    assert ".agents/skills" in json.dumps(codex.stub.model_calls()[0]["input"])
    assert case["facets"]["invocation"] == "automatic:greet"


def test_codex_none_forbids_the_skill(codex: Host) -> None:
    _codex_project(codex)
    _suite(codex, codex.codex_uri(), "{mode: none, skill: greet}")
    codex.stub.reply("Hello, Ada.")
    code, _, verdicts = _run(codex, "left-alone.json")
    assert code == 0, verdicts
    kept = _verdict(verdicts, "never_activates_skill")
    assert (kept["outcome"], kept["evidence"]) == ("pass", "inferred")

    codex.stub.reply([call("exec_command", cmd="cat .agents/skills/greet/SKILL.md")],
                     "HOUSE-GREETING-greet")
    code, _, verdicts = _run(codex, "used.json")
    assert code == 1, verdicts
    breached = _verdict(verdicts, "never_activates_skill")
    # Codex loads a skill by reading its SKILL.md: a breach seen at inferred evidence.
    assert breached["outcome"] == "fail"
    assert breached["note"] == "activated greet (seen at inferred evidence)"
