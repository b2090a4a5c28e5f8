"""``claude [FLAGS…]`` — the installed, signed-in Claude Code CLI, run natively (SPEC §4).

Each trial is ``claude -p --output-format stream-json --verbose [FLAGS…]``
with the prompt on stdin (``--verbose`` is required with ``stream-json``).
The URI's flags follow, e.g. ``claude --max-turns 4 --mcp-config mcp.json
--allowedTools mcp__orders__lookup``; a case's ``model`` and ``effort`` come
last, so the case's pin wins.

A conversation (SPEC §16) runs the CLI once per user message: the first as
above, each later one with ``--resume SESSION_ID`` (the ``session_id`` of
the first run's stream), in the same throwaway home and working folder, so
that Claude Code reads the conversation from its own session record. The
case's ``input`` is given with ``--append-system-prompt-file`` (a file in
the throwaway home: case content stays off the command line).

Sign-in: the CLI's own. Its credentials file (``~/.claude/.credentials.json``,
or under ``CLAUDE_CONFIG_DIR``) is copied byte for byte into the trial's
throwaway home; a ``CLAUDE_CODE_OAUTH_TOKEN`` from ``claude setup-token`` is
left in the environment as the CLI's own sign-in. Provider API keys
(``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN`` …) are removed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ...errors import HarnessFailure
from ...model import Event, Evidence, Trace
from ..base import TrialBroken, TrialRequest, evidence
from ..fixture_server import SERVER
from .base import CliHost, tail, without
from .claude_stream import ClaudeRun, read_stream
from .process import Finished, copy_private

CREDENTIALS = ".credentials.json"


def user_config_dir() -> Path:
    """Where the user's Claude Code keeps its sign-in."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".claude"


def copy_sign_in(home: Path) -> None:
    """A copy of the CLI's credentials file in a throwaway home, nothing else of the user's."""
    copy_private(user_config_dir() / CREDENTIALS, home / ".claude" / CREDENTIALS)


class ClaudeTarget(CliHost):
    """Claude Code in print mode; its ``stream-json`` events become the trace."""

    name = "claude"
    binary_env = "ASSAY_CLAUDE_BIN"
    # Written and checked against 2.1.332; 2.1.232 is the oldest whose stream
    # fields and ``auth status --json`` it reads. Older is refused, not misread.
    minimum = (2, 1, 232)
    install_hint = ("install Claude Code (https://docs.claude.com/claude-code) or name the "
                    "executable in ASSAY_CLAUDE_BIN")
    reserved = frozenset({"-p", "--print", "--output-format", "--input-format", "--verbose",
                          "-c", "--continue", "-r", "--resume", "--session-id"})
    path_flags = frozenset({"--mcp-config", "--settings", "--plugin-dir", "--add-dir",
                            "--system-prompt-file", "--append-system-prompt-file"})
    # A plugin is part of the agent under test; an --add-dir folder is data it may read.
    folder_flags = frozenset({"--plugin-dir"})
    # Asks: in print mode nobody can answer, and a question in plain text is
    # not an event; the stream cannot tell whether the agent asked. Tokens and
    # cost: the host's own totals in the final ``result`` line.
    evidence = evidence(output="observed", tool_calls="observed", skills="observed",
                        tokens="observed", cost="observed", steps="observed",
                        exit_code="observed")

    def prepare_home(self, home: Path) -> None:
        """A copy of the CLI's credentials file, nothing else of the user's."""
        copy_sign_in(home)

    def fixture_argv(self, home: Path, command: list[str]) -> list[str]:
        """The fixture's server in an MCP config of the trial's own; its tools allowed in
        the throwaway home's settings (the URI's ``--allowedTools`` stay as they are)."""
        config = home / "assay-fixture" / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {SERVER: {
            "type": "stdio", "command": command[0], "args": command[1:]}}}))
        settings = home / ".claude" / "settings.json"
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(json.dumps({"permissions": {"allow": [f"mcp__{SERVER}"]}}))
        return ["--mcp-config", str(config)]

    def argv(self, request: TrialRequest, prompt: str, home: Path, work: Path) -> list[str]:
        """``claude -p --output-format stream-json --verbose`` + the URI's flags + pins."""
        model, effort = request.case.model_for(self.name), request.case.effort_for(self.name)
        args = without(self.args, "--model") if model else self.args
        args = without(args, "--effort") if effort else args
        argv = [self.binary, "-p", "--output-format", "stream-json", "--verbose", *args]
        if model:
            argv += ["--model", model]
        if effort:
            argv += ["--effort", effort]
        return argv

    def invoke(self, skill: str, prompt: str) -> str:
        """The skill's slash command first; the prompt follows as its arguments (Claude
        Code puts them after the skill's text, as when a user types ``/NAME …``)."""
        return f"/{skill} {prompt}" if prompt.strip() else f"/{skill}"

    async def check_signed_in(self) -> None:
        """``claude auth status``: only ``loggedIn`` is read; the rest (who) is dropped."""
        done = await self.check([self.binary, "auth", "status", "--json"])
        try:
            status = json.loads("\n".join(line for _, line in done.lines))
        except ValueError:
            status = None
        if not isinstance(status, dict) or "loggedIn" not in status:
            # Its output is not repeated: it may name the account.
            raise HarnessFailure(f"target {self.name}: could not tell whether claude is signed "
                                 f"in (`claude auth status --json` exit {done.exit_code}, "
                                 "no JSON answer)")
        if status.get("loggedIn") is not True:
            raise HarnessFailure(
                f"target {self.name}: claude is not signed in. Sign in with `claude auth "
                "login` (or set CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`); assay "
                "removes provider API keys such as ANTHROPIC_API_KEY from the CLI's "
                "environment and never passes one")

    def session_of(self, finished: Finished) -> str | None:
        """The ``session_id`` the stream names."""
        return read_stream(finished.lines).session_id

    def resume_argv(self, argv: list[str], session: str) -> list[str]:
        """The same command, ``--resume SESSION``: the next message goes on stdin."""
        return [*argv, "--resume", session]

    def system_argv(self, home: Path, system: str) -> list[str]:
        """``--append-system-prompt-file``: Claude Code's own system prompt, then the case's
        (on every run: a resumed session keeps the prompt its first run recorded)."""
        path = home / "assay-system-prompt.txt"
        path.write_text(system, encoding="utf-8", errors="replace")
        return ["--append-system-prompt-file", str(path)]

    def trace(self, finished: Finished, request: TrialRequest, prompt: str,
              home: Path, since: int = 0) -> Trace:
        """The stream read into a trace; no final ``result`` line is a broken trial."""
        run = read_stream(finished.lines)
        if not run.has_result:
            said = tail(finished.stderr) or "nothing on stderr"
            raise TrialBroken(f"claude exited with code {finished.exit_code} without a "
                              f"result ({len(finished.lines)} lines of events): {said}")
        return self._trace_of(run, finished, prompt, finished.exit_code)

    def partial_trace(self, finished: Finished, request: TrialRequest, prompt: str,
                      home: Path, since: int = 0) -> Trace | None:
        """The stream so far, with no result line: no totals, no exit code."""
        return self._trace_of(read_stream(finished.lines), finished, prompt, None)

    def _trace_of(self, run: ClaudeRun, finished: Finished, prompt: str,
                  exit_code: int | None) -> Trace:
        events = run.events
        trial_evidence = dict(self.evidence)
        if run.usage.tokens is None:
            trial_evidence["tokens"] = Evidence.UNAVAILABLE
        if run.usage.cost_usd is None:
            trial_evidence["cost"] = Evidence.UNAVAILABLE
        if prompt.lstrip().startswith("/"):
            # A slash command expands a skill before the model runs, and the
            # stream does not say so: the skill is inferred from the prompt.
            trial_evidence["skills"] = Evidence.INFERRED
            command = prompt.lstrip()[1:].split(maxsplit=1)
            if command and command[0] in run.skills_listed:
                events = [Event(kind="skill", name=command[0], t=0.0), *events]
        facets = dict(self.facets)
        if run.model:
            facets["model"] = run.model
        return Trace(
            output=run.output, status=run.status, error=run.error, events=events,
            usage=run.usage, steps=run.steps, settled=run.settled,
            exit_code=exit_code, duration_s=finished.duration_s,
            stdout=finished.stderr, facets=facets, evidence=trial_evidence,
        )
