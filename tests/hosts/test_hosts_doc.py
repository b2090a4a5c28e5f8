"""docs/hosts.md, run as written: the real ``claude`` and ``codex`` against scripted models.

The page cannot run in the plain page runner's empty folder (tests/docs/test_pages.py):
it needs the host CLIs and a model server behind them. This test runs it with
the same runner (``tests/docs/pages.py``), in a folder of its own, after giving
the page what its reader has before reading it:

- ``claude`` and ``codex`` on ``PATH``: the pinned native binaries (tests/hosts/install.sh);
- a signed-in user: the page's ``HOME`` holds Claude Code's credentials file (a
  made-up token) and Codex's ``auth.json``, written by its own ``codex login``;
- the endpoints the page names, on fixed loopback ports: a scripted Anthropic
  Messages API at ``http://127.0.0.1:8751`` (the page exports
  ``ANTHROPIC_BASE_URL`` to it) and a scripted Responses API at
  ``http://127.0.0.1:8752/v1`` (the base URL of the page's Codex provider).
  Their model plays by the rule the page states: it loads the refund skill
  when asked about a refund, greets a greeting, and reads a file over and over
  when asked to check every order;
- a provider key in ``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY`` and
  ``CODEX_API_KEY``, as a reader may have set: the page says it is not used,
  and no request may carry it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic_stub
import openai_stub
import pytest
from anthropic_stub import Turn, text, tool
from hostlib import CANARY, CLAUDE_CREDENTIALS, CODEX_KEY, Host, claude_binary, codex_binary
from tests.docs.pages import Page

pytestmark = pytest.mark.real

PAGE = Path(__file__).resolve().parents[2] / "docs" / "hosts.md"
CLAUDE_PORT, CODEX_PORT = 8751, 8752


def _claude_prompt(body: Any) -> str:
    """The user's prompt: the first user message's text, less the CLI's own reminders."""
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        return " ".join(b.get("text", "") for b in content if b.get("type") == "text"
                        and not b.get("text", "").startswith("<system-reminder>"))
    return ""


def claude_model(body: Any) -> Turn:
    """The Messages API's model, by rule: the turn after the conversation's last reply."""
    prompt = _claude_prompt(body).lower()
    if "refund" in prompt:
        # The skill by the name the CLI lists: a plugin's is namespaced.
        listed = "shop:refund-policy" in json.dumps(body)
        skill = "shop:refund-policy" if listed else "refund-policy"
        script = [Turn([tool("Skill", "s1", skill=skill)]),
                  Turn([text("Order A-1 was delivered 12 days ago: it can be refunded.")])]
    elif "every order" in prompt:
        script = [Turn([tool("Read", f"r{n}", file_path="orders.txt")]) for n in range(1, 9)]
    else:
        script = [Turn([text("Hello! How can I help with your order?")])]
    done = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
    return script[done] if done < len(script) else Turn([text("(the script has ended)")])


#: The Responses API's script: a refund conversation (turns 0-1), a greeting (turn 2).
CODEX_SCRIPT = [
    [openai_stub.call("exec_command", cmd="cat .agents/skills/refund-policy/SKILL.md")],
    "Order A-1 was delivered 12 days ago: it can be refunded.",
    "Hello! How can I help with your order?",
]


def codex_turn(body: Any) -> int:
    """The turn to play: the next one of its conversation, else where its prompt starts."""
    found = [int(n) for n in openai_stub._TURN.findall(json.dumps(body.get("input", [])))]
    if found:
        return max(found) + 1
    prompts = [part.get("text", "") for item in body.get("input", [])
               if item.get("type") == "message" and item.get("role") == "user"
               for part in item.get("content", []) if not part.get("text", "").startswith("<")]
    return 0 if "refund" in " ".join(prompts).lower() else 2


@pytest.fixture
def page(tmp_path: Path) -> Iterator[tuple[Page, Any, Any]]:
    """The page's folder and environment, with both scripted servers running."""
    root = tmp_path / "page"
    root.mkdir()
    page = Page(root)
    home = Path(page.env["HOME"])
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / ".credentials.json").write_text(json.dumps(CLAUDE_CREDENTIALS))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to(claude_binary())
    (bin_dir / "codex").symlink_to(codex_binary())
    for name in ("CLAUDE_CONFIG_DIR", "CLAUDE_CODE_OAUTH_TOKEN", "CODEX_HOME"):
        page.env.pop(name, None)
    page.env["PATH"] = f"{bin_dir}{os.pathsep}{page.env['PATH']}"
    login = subprocess.run(["codex", "login", "--with-api-key"], input=CODEX_KEY,
                           env=page.env, capture_output=True, text=True, timeout=60)
    assert login.returncode == 0, login.stderr
    page.env.update({name: CANARY for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY",
                                                "CODEX_API_KEY")})
    page.env["ASSAY_TEST_MARKER"] = tmp_path.name
    with anthropic_stub.serve(CLAUDE_PORT) as claude, openai_stub.serve(CODEX_PORT) as codex:
        claude.turn_for = claude_model  # type: ignore[method-assign]
        codex.turn_for = codex_turn  # type: ignore[method-assign]
        codex.reply(*CODEX_SCRIPT)
        yield page, claude, codex
    assert Host(claude, home, root, tmp_path.name).leftovers() == []


def test_the_page_runs_as_written(page: tuple[Page, Any, Any]) -> None:
    runner, claude, codex = page
    runner.run(PAGE.read_text(encoding="utf-8"))

    # The page's endpoints answered every model call, each CLI signed in as itself,
    # and the key in the environment reached neither server.
    assert claude.model_calls() and codex.model_calls()
    for stub, sign_in in ((claude, CLAUDE_CREDENTIALS["claudeAiOauth"]["accessToken"]),
                          (codex, CODEX_KEY)):
        auth = {v for s in stub.seen if s.method == "POST"
                for k, v in s.headers.items() if k.lower() == "authorization"}
        assert auth == {f"Bearer {sign_in}"}
        seen = b"".join(s.raw + json.dumps(s.headers).encode() for s in stub.seen)
        assert CANARY.encode() not in seen, "a provider key reached the model server"
