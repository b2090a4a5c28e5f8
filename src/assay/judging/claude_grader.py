"""One judge call to the ``claude`` host: Claude Code as a semantic grader (SPEC §9).

``ask_claude`` runs the installed, signed-in ``claude`` CLI once, natively,
in print mode, with the rendered prompt on stdin, pinned to one model and
with nothing to act with: no built-in tool, no MCP server, no skill, no
settings, no session kept (the flags and why: docs/decisions/0035). It is
launched the way the ``claude`` target launches a trial — the same lookup
of the executable, throwaway home holding a byte copy of the CLI's own
sign-in, environment without provider keys (PRINCIPLES 10), process group
killed at the timeout — and its ``stream-json`` output is read by the
target's reader.

The opinion keeps the final text (``raw``), the model the server says
answered, the tokens and cost from the result line (the host's own figures:
observed), the latency on the injected clock and the whole event stream.
Like ``client.ask`` it never raises but on cancellation: a missing CLI, a
signed-out one, a timeout, a non-zero exit or output that is not a stream
is an opinion with ``error`` set, a short reason that quotes neither the
prompt nor the CLI's text (either may hold a hidden case).
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..targets.hosts.base import find_binary, version_refusal
from ..targets.hosts.claude import ClaudeTarget, copy_sign_in
from ..targets.hosts.claude_stream import read_stream
from ..targets.hosts.process import (
    Finished,
    child_environment,
    parse_version,
    run_cli,
    stage_workdir,
    throwaway_home,
)
from .client import DEFAULT_TIMEOUT_S
from .opinion import Opinion

#: What makes one CLI run a grader's one answer, and nothing else (docs/decisions/0035).
GRADER_FLAGS: tuple[str, ...] = (
    "-p", "--output-format", "stream-json", "--verbose",
    "--tools", "",                    # no built-in tool: a grader reads, it does not act
    "--strict-mcp-config",            # no MCP server (none is given)
    "--disable-slash-commands",       # no skill, no command
    "--permission-mode", "dontAsk",   # whatever would ask for permission is refused
    "--setting-sources", "",          # no user, project or local settings, no CLAUDE.md
    "--system-prompt", "",            # the template is the whole instruction
    "--no-session-persistence",       # nothing to resume, nothing left behind
    "--max-turns", "1",               # one reply
)

NOT_FOUND = ("the claude CLI was not found (ASSAY_CLAUDE_BIN or PATH); install Claude Code "
             "(https://docs.claude.com/claude-code)")
NOT_SIGNED_IN = ("claude is not signed in: sign in with `claude auth login` (or set "
                 "CLAUDE_CODE_OAUTH_TOKEN); provider API keys are never passed to it")

#: An error kind the CLI names (``model_not_found``): an identifier, safe to repeat.
_KIND = re.compile(r"[a-z][a-z0-9_]{0,39}")


@dataclass(frozen=True, slots=True)
class ClaudeJudgeSettings:
    """Which model the ``claude`` host grades with, and how long one answer may take.

    ``model`` is required: the host's default model changes under the user,
    and an opinion whose model nobody chose cannot be compared with the next
    one. ``binary`` names the executable; None looks where the ``claude``
    target looks (``ASSAY_CLAUDE_BIN``, else ``PATH``). A bad value is a
    mistake in the configuration: ``ValueError``.
    """

    model: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    binary: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model \
                or any(c.isspace() or not c.isprintable() for c in self.model):
            raise ValueError("the claude judge needs a model name (claude:MODEL)")
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ValueError(f"judge_timeout_s must be > 0, not {self.timeout_s!r}")

    def argv(self, binary: str) -> list[str]:
        """The command line of one answer (the prompt goes on stdin)."""
        # ``--model=`` so that no model name can be read as a flag.
        return [binary, *GRADER_FLAGS, f"--model={self.model}"]


async def ask_claude(
    settings: ClaudeJudgeSettings,
    prompt: str,
    *,
    prompt_digest: str,
    clock: Callable[[], float] = time.perf_counter,
) -> Opinion:
    """Ask the ``claude`` host once; never raises but on cancel.

    ``parameters`` records the host and its version (the CLI's fixed part of
    the system prompt changes with it); the prompt digest is the caller's.
    """
    parameters: dict[str, Any] = {"host": "claude"}
    start = clock()
    finished = Finished(exit_code=-1)

    def failed(error: str, stream: str | None = None) -> Opinion:
        return Opinion(raw=None, model=settings.model, prompt_digest=prompt_digest,
                       parameters=parameters, latency_s=round(clock() - start, 6),
                       error=error, stream=stream)

    try:
        stdin = prompt.encode()
    except UnicodeEncodeError:
        return failed("the prompt is not valid Unicode (a lone surrogate)")
    binary = _binary(settings)
    if binary is None:
        return failed(NOT_FOUND)
    try:
        async with asyncio.timeout(settings.timeout_s):
            with throwaway_home("assay-claude-judge-") as home:
                copy_sign_in(home)
                work = stage_workdir(home, None)
                env = child_environment(os.environ, home)
                refusal = await _check_version(binary, work, env, parameters)
                if refusal:
                    return failed(refusal)
                await run_cli(settings.argv(binary), cwd=work, env=env, stdin=stdin,
                              into=finished)
    except TimeoutError:
        return failed(f"timed out after {settings.timeout_s:g}s", _stream(finished))
    except OSError as exc:
        return failed(f"cannot run claude ({exc.strerror or type(exc).__name__})")
    except Exception as exc:  # anything else: an answer too, never a crash of the battery
        return failed(f"unexpected {type(exc).__name__}", _stream(finished))
    return _opinion(finished, settings, prompt_digest, parameters,
                    latency_s=round(clock() - start, 6))


def _binary(settings: ClaudeJudgeSettings) -> str | None:
    if settings.binary is None:
        return find_binary(ClaudeTarget.name, ClaudeTarget.binary_env)
    named = settings.binary
    return named if os.path.isfile(named) and os.access(named, os.X_OK) else None


async def _check_version(binary: str, work: Path, env: dict[str, str],
                         parameters: dict[str, Any]) -> str | None:
    """Why this CLI is not asked (None: it is), the target's rule; its version recorded."""
    done = await run_cli([binary, "--version"], cwd=work, env=env)
    found = parse_version(done.lines[0][1] if done.lines else "")
    if done.exit_code != 0 or found is None:
        return f"`claude --version` failed (exit {done.exit_code})"
    parameters["host_version"] = str(found)
    return version_refusal(ClaudeTarget.name, found, ClaudeTarget.minimum)


def _stream(finished: Finished) -> str | None:
    """The CLI's stdout as it came, one event a line; None when it printed nothing."""
    return "\n".join(line for _, line in finished.lines) or None


def _opinion(finished: Finished, settings: ClaudeJudgeSettings, prompt_digest: str,
             parameters: dict[str, Any], *, latency_s: float) -> Opinion:
    """The opinion a finished run gives: its answer, or why there is none."""
    run = read_stream(finished.lines)
    error: str | None = None
    raw: str | None = None
    kind = run.api_error if run.api_error and _KIND.fullmatch(run.api_error) else None
    if not run.has_result:
        error = (f"claude exited with code {finished.exit_code} without a result"
                 if run.unreadable < len(finished.lines) or not finished.lines
                 else f"claude's output is not an event stream (exit {finished.exit_code})")
    elif kind == "authentication_failed":
        error = NOT_SIGNED_IN
    elif run.status == "timeout":
        error = "claude stopped at a limit before answering"
    elif run.status != "ok":
        error = "claude reported an error" + (f" ({kind})" if kind else "")
    elif finished.exit_code != 0:
        error = f"claude exited with code {finished.exit_code}"
    elif not isinstance(run.output, str):
        error = "no text in the answer"
    else:
        raw = run.output
    usage = run.usage
    return Opinion(
        raw=raw, model=run.served_model or settings.model, prompt_digest=prompt_digest,
        parameters=parameters, input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens, cost_usd=usage.cost_usd,
        cost_observed=usage.cost_usd is not None, latency_s=latency_s, error=error,
        stream=_stream(finished))


__all__ = ["GRADER_FLAGS", "ClaudeJudgeSettings", "ask_claude"]
