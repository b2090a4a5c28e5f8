"""``codex [FLAGS…]`` — the installed, signed-in Codex CLI, run natively (SPEC §4).

Each trial is ``codex exec --json --skip-git-repo-check --disable plugins
--disable apps --disable remote_plugin [FLAGS…]`` with the prompt on stdin,
in a throwaway home whose ``CODEX_HOME`` holds only a copy of the CLI's own
``auth.json``: the user's ``config.toml``, plugins and history are neither
trial state nor changed by a trial. What a run needs — model, provider, MCP
servers, sandbox — is given in the URI's flags, e.g. ``codex -m gpt-5.5 -s
workspace-write -c 'mcp_servers.orders={command="orders-mcp", required=true}'``;
a case's ``model`` and ``effort`` come last, so the case's pin wins.

A conversation (SPEC §16) runs the CLI once per user message: the first as
above, each later one as ``codex exec [the same flags] resume THREAD_ID -``
(the ``thread_id`` of the first run's stream), in the same throwaway home
and working folder, so that Codex reads the conversation from its own
session record. The case's ``input`` is ``developer_instructions`` in the
throwaway home's ``config.toml`` (case content stays off the command line;
a ``-c developer_instructions=…`` in the URI's flags would replace it).
Each resumed run reports the usage of the whole thread, so the last turn's
is the conversation's; each run's calls are read from what it added to the
session record.

The three ``--disable`` flags keep Codex from fetching plugin and app
catalogues over the network, which a throwaway home has none of anyway.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from ...errors import HarnessFailure
from ...model import Event, Evidence, Trace
from ..base import TargetOptions, TrialBroken, TrialRequest, evidence
from ..fixture_server import SERVER
from ..prices import load_prices
from .base import CliHost, tail, without
from .codex_session import complete_from_session, read_session, record_size
from .codex_stream import CodexRun, read_stream
from .process import Finished, copy_private

AUTH = "auth.json"
#: The facet that counts the calls only the session record showed.
RECOVERED = "calls_from_session_record"
OFFLINE = ["--disable", "plugins", "--disable", "apps", "--disable", "remote_plugin"]


def user_codex_home() -> Path:
    """Where the user's Codex keeps its sign-in."""
    configured = os.environ.get("CODEX_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".codex"


class CodexTarget(CliHost):
    """Codex in ``exec`` mode; its ``--json`` events (and session record) become the trace."""

    name = "codex"
    binary_env = "ASSAY_CODEX_BIN"
    # Written and checked against 0.163.0; 0.147.0 is the oldest whose item
    # types, session record and --disable features it reads. Older is refused.
    minimum = (0, 147, 0)
    install_hint = ("install Codex (npm install -g @openai/codex) or name the executable in "
                    "ASSAY_CODEX_BIN")
    reserved = frozenset({"exec", "e", "--json", "--experimental-json", "--ephemeral",
                          "resume", "-C", "--cd"})
    path_flags = frozenset({"--output-schema", "--add-dir", "-i", "--image"})
    # A resumed run's ``turn.completed`` counts the whole thread (checked with 0.163).
    cumulative_usage = True
    # Tokens: Codex's own count (observed). Cost: Codex reports tokens, not
    # money; a price is looked up (inferred). Skills: only inferable (a
    # command read a SKILL.md).
    evidence = evidence(output="observed", tool_calls="observed", skills="inferred",
                        tokens="observed", steps="observed", exit_code="observed")

    def __init__(self, uri: str, options: TargetOptions) -> None:
        super().__init__(uri, options)
        self.prices = load_prices()
        priced = self.prices.lookup(self.facets.get("model")) is not None
        self.evidence = {**self.evidence,
                         "cost": Evidence.INFERRED if priced else Evidence.UNAVAILABLE}

    def extra_env(self, home: Path) -> dict[str, str]:
        """``CODEX_HOME`` inside the throwaway home."""
        return {"CODEX_HOME": str(home / ".codex")}

    def prepare_home(self, home: Path) -> None:
        """A copy of the CLI's ``auth.json``, nothing else of the user's."""
        (home / ".codex").mkdir(mode=0o700)
        copy_private(user_codex_home() / AUTH, home / ".codex" / AUTH)

    def fixture_argv(self, home: Path, command: list[str]) -> list[str]:
        """The fixture's server as one of Codex's MCP servers, required and approved."""
        args = ", ".join(json.dumps(arg) for arg in command[1:])
        return ["-c", f"mcp_servers.{SERVER}={{command={json.dumps(command[0])}, "
                      f"args=[{args}], required=true, "
                      'default_tools_approval_mode="approve"}']

    def argv(self, request: TrialRequest, prompt: str, home: Path, work: Path) -> list[str]:
        """``codex exec --json …`` + the URI's flags + the case's pins; the prompt is stdin."""
        pinned = request.case.model_for(self.name)
        args = without(self.args, "-m", "--model") if pinned else self.args
        argv = [self.binary, "exec", "--json", "--skip-git-repo-check", *OFFLINE, *args]
        if pinned:
            argv += ["-m", pinned]
        effort = request.case.effort_for(self.name)
        if effort:
            argv += ["-c", f"model_reasoning_effort={json.dumps(effort)}"]
        return argv

    def invoke(self, skill: str, prompt: str) -> str:
        """The skill's ``$`` mention first: Codex puts the skill's ``SKILL.md`` in the
        conversation after the prompt, as when a user mentions it."""
        return f"${skill} {prompt}" if prompt.strip() else f"${skill}"

    async def check_signed_in(self) -> None:
        """``codex login status``: only its exit code is read (its output shows part of a key)."""
        done = await self.check([self.binary, "login", "status"])
        if done.exit_code != 0:
            raise HarnessFailure(
                f"target {self.name}: codex is not signed in (`codex login status` exit "
                f"{done.exit_code}). Sign in with `codex login`; assay removes provider API "
                "keys such as OPENAI_API_KEY from the CLI's environment and never passes one")

    def session_of(self, finished: Finished) -> str | None:
        """The ``thread_id`` the stream names."""
        return read_stream(finished.lines).session_id

    def resume_argv(self, argv: list[str], session: str) -> list[str]:
        """``codex exec [the same flags] resume SESSION -``: the next message on stdin."""
        return [*argv, "resume", session, "-"]

    def system_argv(self, home: Path, system: str) -> list[str]:
        """``developer_instructions`` in the throwaway home's ``config.toml``: a developer
        message after Codex's own instructions, read again by each resumed run (and kept
        once in the session). No flag: case content stays off the command line."""
        config = home / ".codex" / "config.toml"
        config.write_text(f"developer_instructions = {toml_string(system)}\n",
                          encoding="utf-8")
        return []

    def turn_mark(self, home: Path) -> int:
        """The size of the session record: a resumed run appends to it."""
        return record_size(home / ".codex")

    def merged_facets(self, turns: Sequence[dict[str, str]]) -> dict[str, str]:
        """A later turn's facets win, and the calls found only in the session record add up."""
        merged = super().merged_facets(turns)
        recovered = sum(int(f.get(RECOVERED, "0")) for f in turns)
        if recovered:
            merged[RECOVERED] = str(recovered)
        return merged

    def trace(self, finished: Finished, request: TrialRequest, prompt: str,
              home: Path, since: int = 0) -> Trace:
        """The stream read into a trace; a run that never finished its turn is broken."""
        run = read_stream(finished.lines)
        if not run.finished:
            said = tail(finished.stderr) or "nothing on stderr"
            raise TrialBroken(f"codex exited with code {finished.exit_code} before its turn "
                              f"ended ({len(finished.lines)} lines of events): {said}")
        return self._trace_of(run, finished, request, home, finished.exit_code, since)

    def partial_trace(self, finished: Finished, request: TrialRequest, prompt: str,
                      home: Path, since: int = 0) -> Trace | None:
        """The stream (and session record) so far: no turn end, no totals, no exit code."""
        return self._trace_of(read_stream(finished.lines), finished, request, home, None, since)

    def _trace_of(self, run: CodexRun, finished: Finished, request: TrialRequest, home: Path,
                  exit_code: int | None, since: int = 0) -> Trace:
        trial_evidence = dict(self.evidence)
        session = read_session(home / ".codex", home / "work", since)
        steps: int | None = None
        model = request.case.model_for(self.name) or self.facets.get("model")
        recovered = 0
        if session is None:
            # Without the record a refused command could be missing from the stream.
            trial_evidence["tool_calls"] = Evidence.INFERRED
            trial_evidence["steps"] = Evidence.UNAVAILABLE
        else:
            # A call only the record shows was not seen in the host's own stream.
            recovered = complete_from_session(run, session)
            steps = session.responses or None
            model = session.model or model
            if session.code_mode or recovered:
                trial_evidence["tool_calls"] = Evidence.INFERRED
        usage = run.usage
        price = self.prices.lookup(model)
        if usage.input_tokens is None or usage.output_tokens is None:
            trial_evidence["tokens"] = trial_evidence["cost"] = Evidence.UNAVAILABLE
        elif price is not None:
            usage = usage.model_copy(
                update={"cost_usd": price.cost(usage.input_tokens, usage.output_tokens)})
            trial_evidence["cost"] = Evidence.INFERRED
        else:
            trial_evidence["cost"] = Evidence.UNAVAILABLE
        facets = dict(self.facets)
        if model:
            facets["model"] = model
        if recovered:
            facets[RECOVERED] = str(recovered)
        events = run.events
        if session is not None and session.skills_given:
            # A mentioned skill is put in before the model runs, and the stream does not
            # say so: inferred from the record, as a skill read by a command is.
            events = [*(Event(kind="skill", name=skill, t=0.0)
                        for skill in dict.fromkeys(session.skills_given)), *events]
        return Trace(
            output=run.output, status=run.status, error=run.error, events=events,
            usage=usage, steps=steps, settled=run.settled, exit_code=exit_code,
            duration_s=finished.duration_s, stdout=finished.stderr, facets=facets,
            evidence=trial_evidence,
        )


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string: quotes, backslashes and control characters escaped
    (a lone surrogate, which no UTF-8 file can hold, as U+FFFD)."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\ufffd")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)
