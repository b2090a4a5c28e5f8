"""Asking for the opinions one trace's quality checks rest on (SPEC §9).

A ``Panel`` is made once per battery from the suite and ``JudgeOptions``:
it resolves every quality check's judge before anything runs (a judge
nobody named, or an OpenAI-compatible judge without a base URL, is a usage
error then, not a hundred inconclusive trials later), and then, for each
trace the battery hands it, asks what the checks need — one answer per
``judge``, one per criterion of a ``rubric`` (asked at once), one
similarity per ``similar`` — bounded by ``concurrency`` calls in flight.
A ``python:`` judge is imported then too (``python_judge.load``), from the
folder of the suite file that names it, and its module's digests become
part of its checks' prompt digest: an edited judge is another judge.

Every answer goes through the judge cache first (``targets.call_cache``,
folder ``judge``), keyed by suite, case, trial index, judge model, the
check's prompt digest and the digest of the filled prompt: a rerun with the
same outputs is served without a call, trial 2 never gets trial 1's answer,
and a changed output misses. A served answer is marked ``cached`` and costs
this run nothing.

The battery reads the opinions into verdicts with the pure
``checks.grade_trace``; nothing here grades.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..canonical import digest
from ..errors import UsageError
from ..model import Assertion, Case, Suite, Trace
from ..model.values import select
from ..targets.call_cache import CallCache
from .client import DEFAULT_TIMEOUT_S, JudgeSettings, ask, make_client
from .judges import ENV_BASE_URL, ENV_JUDGE, JudgeRef, resolve_judge
from .opinion import OPINION_CHECKS, Opinion
from .options import JudgeOptions
from .python_judge import Caller, PythonJudge, inputs_of
from .templates import as_text, default_template, prompt_digest, render


@dataclass(frozen=True)
class _Question:
    """One answer a check needs: to whom, what, under which identity."""

    judge: JudgeRef | None  # None: a local similarity, no judge
    prompt: str
    prompt_digest: str
    #: What a ``python:`` judge is given beside the prompt (None for any other judge).
    inputs: Mapping[str, Any] | None = None


class Panel:
    """The judges of one battery. ``close()`` when done."""

    def __init__(self, suite: Suite, options: JudgeOptions, *,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.suite = suite
        self.options = options
        self.clock = clock
        self.timeout_s = options.timeout_s or suite.judge_timeout_s or DEFAULT_TIMEOUT_S
        self.cache = CallCache("judge", options.cache_root) if options.cache else None
        self._limit = asyncio.Semaphore(max(1, options.concurrency))
        self._clients: dict[str, Any] = {}
        self._embedder: Any = None
        # Both are the same for every trial of the run, and cost a few hundred µs each
        # (a URL check; a digest of the whole template): made once, not per question.
        self._settings_of: dict[JudgeRef, JudgeSettings] = {}
        self._identities: dict[tuple[JudgeRef, str, str, str], str] = {}
        self._by_position: dict[tuple[str, int], str] = {}
        self._facets: dict[tuple[tuple[Any, ...], tuple[Any, ...]], str] = {}
        self._python: dict[JudgeRef, PythonJudge] = {}
        self._caller: Caller | None = None
        self._judges = self._resolve()
        if any(a.check == "similar" for case in suite.cases for a in case.expect):
            from .similarity import MODEL_ENV, load_embedder

            # Loaded now (once per process): a missing extra, or a model that is not the
            # pinned one, is a usage error before anything runs, and no trial waits a
            # second and a half for the model.
            self._embedder = load_embedder(options.env.get(MODEL_ENV) or None)

    # -- before the run ---------------------------------------------------------------

    def _resolve(self) -> dict[tuple[str, int], JudgeRef]:
        """Each judged assertion's judge, by (case id, position); usage errors named."""
        found: dict[tuple[str, int], JudgeRef] = {}
        needs_url = False
        for case in self.suite.cases:
            for position, assertion in enumerate(case.expect):
                if assertion.check not in ("judge", "rubric"):
                    continue
                arg = assertion.arg if isinstance(assertion.arg, dict) else {}
                try:
                    judge = resolve_judge(arg.get("model"), self.options.judge,
                                          self.suite.judge, self.options.env)
                except ValueError as exc:
                    raise UsageError(f"suite {self.suite.id}: {exc}") from None
                if judge is None:
                    raise UsageError(
                        f"suite {self.suite.id} has {assertion.check} checks but names no judge: "
                        "give the suite a judge: (openai:MODEL), or pass --judge or set "
                        "ASSAY_JUDGE")
                if judge.kind == "python" and judge not in self._python:
                    self._python[judge] = self._load_python(judge, case, assertion, arg)
                needs_url = needs_url or judge.kind == "openai"
                found[(case.id, position)] = judge
        if needs_url and not self._base_url():
            raise UsageError(
                f"suite {self.suite.id}: an openai: judge needs its server's address: pass "
                f"--judge-base-url URL or set {ENV_BASE_URL}")
        if needs_url:
            from ..targets.openai import check_base_url

            try:
                check_base_url(self._base_url() or "")
            except UsageError as exc:
                raise UsageError(f"judge: {exc}") from None
        return found

    def _load_python(self, judge: JudgeRef, case: Case, assertion: Assertion,
                     arg: Mapping[str, Any]) -> PythonJudge:
        """A ``python:`` judge imported; a usage error naming who named it if it cannot be.

        Its module is looked for beside the suite file that names it: the
        check's own file for a check's ``model:``, else the suite's.
        """
        from .python_judge import load

        own = bool(arg.get("model"))
        where = Path(assertion.file).parent if own and assertion.file else \
            Path(self.suite.source).parent if self.suite.source else \
            Path(assertion.file).parent if assertion.file else None
        try:
            return load(judge, where)
        except ValueError as exc:
            if own and case.split == "hidden":
                raise UsageError(f"suite {self.suite.id}: a hidden case's judge (model:) cannot "
                                 "be loaded (details withheld: hidden case)") from None
            if own:
                line = f":{assertion.line}" if assertion.line else ""
                named = f"case {case.id!r}: model:"
                named = f"{assertion.file}{line}: {named}" if assertion.file else named
            elif self.options.judge:
                named = "--judge"
            elif self.options.env.get(ENV_JUDGE):
                named = ENV_JUDGE
            else:
                named = f"{self.suite.source}: judge:" if self.suite.source else "judge:"
            raise UsageError(f"suite {self.suite.id}: {named} {judge.uri}: {exc}") from None

    def _base_url(self) -> str | None:
        return self.options.base_url or self.options.env.get(ENV_BASE_URL) or None

    def _settings(self, judge: JudgeRef) -> JudgeSettings:
        settings = self._settings_of.get(judge)
        if settings is None:
            settings = self._settings_of[judge] = JudgeSettings(
                model=judge.model, base_url=self._base_url() or "", timeout_s=self.timeout_s)
        return settings

    def facet(self, case: Case) -> str | None:
        """The case's ``judge`` facet: which judges with which prompts, as one digest.

        None when the case asks no opinion. Two runs whose judges or
        templates differ are not compared as if their opinions were alike.
        """
        judged = tuple((position, self._judges[(case.id, position)].uri,
                        self._identity(case, position, assertion))
                       for position, assertion in enumerate(case.expect)
                       if (case.id, position) in self._judges)
        similar = tuple((position, str(a.arg.get("to"))) for position, a in enumerate(case.expect)
                        if a.check == "similar" and isinstance(a.arg, dict))
        if not judged and not similar:
            return None
        # Cases that share their judged checks share the digest: it is made once.
        found = self._facets.get((judged, similar))
        if found is None:
            named = [list(entry) for entry in judged]
            named += [[position, self._similar_model(), digest({"to": to})]
                      for position, to in similar]
            found = self._facets[(judged, similar)] = digest(named)
        return found

    def _identity(self, case: Case, position: int, assertion: Assertion) -> str:
        """The prompt digest of a judged check: its template and what shapes its answers."""
        found = self._by_position.get((case.id, position))
        if found is None:
            found = self._by_position[(case.id, position)] = self._digest_of(case, position,
                                                                               assertion)
        return found

    def _digest_of(self, case: Case, position: int, assertion: Assertion) -> str:
        judge = self._judges[(case.id, position)]
        arg = assertion.arg if isinstance(assertion.arg, dict) else {}
        template = arg.get("template") or default_template(
            "rubric" if assertion.check == "rubric" else "judge")
        # Cases that share a judge, a template and criteria share the digest.
        key = (judge, assertion.check, template,
               json.dumps(arg.get("criteria"), sort_keys=True, default=str))
        identity = self._identities.get(key)
        if identity is None:
            settings = self._settings(judge).sampling() if judge.kind == "openai" else \
                dict(self._python[judge].parameters) if judge.kind == "python" else {}
            shaping = {"judge": judge.uri, "criteria": arg.get("criteria"), **settings}
            identity = self._identities[key] = prompt_digest(template, shaping)
        return identity

    # -- during the run ---------------------------------------------------------------

    async def opinions(self, case: Case, n: int, trace: Trace) -> dict[int, list[Opinion]]:
        """Every opinion the case's quality checks need on ``trace``, by assertion position."""
        jobs: list[tuple[int, Awaitable[Opinion]]] = []
        for position, assertion in enumerate(case.expect):
            if assertion.check not in OPINION_CHECKS:
                continue
            found, actual = select(trace.output, assertion.path)
            if not found:
                continue  # read as inconclusive: the path selects nothing
            for question in self._questions(case, position, assertion, actual):
                jobs.append((position, self._answer(case, n, question, assertion, actual)))
        if len(jobs) == 1:  # the usual case: one question, no task to gather it with
            answers: list[Opinion] = [await jobs[0][1]]
        else:
            answers = list(await asyncio.gather(*(job for _, job in jobs)))
        found_opinions: dict[int, list[Opinion]] = {}
        for (position, _), opinion in zip(jobs, answers, strict=True):
            found_opinions.setdefault(position, []).append(opinion)
        return found_opinions

    def _questions(self, case: Case, position: int, assertion: Assertion,
                   actual: Any) -> list[_Question]:
        arg = assertion.arg if isinstance(assertion.arg, dict) else {}
        if assertion.check == "similar":
            from .similarity import question_digest

            return [_Question(None, "", question_digest(str(arg.get("to", "")),
                                                        self._embedder.model_id))]
        identity = self._identity(case, position, assertion)
        judge = self._judges[(case.id, position)]
        python = judge.kind == "python"
        if assertion.check == "judge":
            template = arg.get("template") or default_template("judge")
            inputs = inputs_of("judge", criteria=arg.get("criteria"), expected=case.expected,
                               actual=actual) if python else None
            return [_Question(judge, render(template, criteria=arg.get("criteria"),
                                            expected=case.expected, actual=actual), identity,
                              inputs)]
        template = arg.get("template") or default_template("rubric")
        return [_Question(judge, render(template, criterion=item["name"],
                                        description=item.get("description", ""),
                                        expected=case.expected, actual=actual), identity,
                          inputs_of("rubric", criterion=item["name"],
                                    description=item.get("description", ""),
                                    expected=case.expected, actual=actual) if python else None)
                for item in arg.get("criteria") or []]

    async def _answer(self, case: Case, n: int, question: _Question, assertion: Assertion,
                      actual: Any) -> Opinion:
        model = question.judge.uri if question.judge is not None else self._similar_model()
        key = None
        if self.cache is not None:
            key = CallCache.key([self.suite.id, case.id, n, model, question.prompt_digest,
                                 digest({"prompt": question.prompt, "actual": as_text(actual)})])
            kept = self.cache.get(key)
            if kept is not None:
                try:
                    return replace(Opinion.from_json(kept), cached=True)
                except ValueError:
                    pass  # not an opinion after all: asked again
        async with self._limit:
            opinion = await self._ask(question, assertion, actual)
        # The slot just freed goes to the next question first: it is sent before this
        # answer's trial is graded, folded and recorded, not after.
        await asyncio.sleep(0)
        if self.cache is not None and key is not None and opinion.error is None:
            # Errors are not kept: a timeout or a 500 is asked again next time.
            self.cache.put_later(key, opinion.to_json())
        return opinion

    async def _ask(self, question: _Question, assertion: Assertion, actual: Any) -> Opinion:
        judge = question.judge
        if judge is None:
            return await asyncio.to_thread(self._similarity, assertion, actual)
        if judge.kind == "claude":
            from .claude_grader import ClaudeJudgeSettings, ask_claude

            return await ask_claude(ClaudeJudgeSettings(model=judge.model,
                                                        timeout_s=self.timeout_s),
                                    question.prompt, prompt_digest=question.prompt_digest,
                                    clock=self.clock)
        if judge.kind == "python":
            if self._caller is None:
                self._caller = Caller(self.options.concurrency, self.clock)
            return await self._caller.ask(self._python[judge], question.prompt,
                                          question.inputs or {},
                                          prompt_digest=question.prompt_digest,
                                          timeout_s=self.timeout_s)
        settings = self._settings(judge)
        client = self._clients.get(settings.model)
        if client is None:
            client = self._clients[settings.model] = make_client(settings)
        return await ask(client, settings, question.prompt, prompt_digest=question.prompt_digest,
                         clock=self.clock, prices=self.options.prices)

    def _similar_model(self) -> str:
        return f"similar:{self._embedder.model_id}" if self._embedder is not None else "similar"

    def _similarity(self, assertion: Assertion, actual: Any) -> Opinion:
        from .similarity import measure

        arg = assertion.arg if isinstance(assertion.arg, dict) else {}
        return measure(self._embedder, str(arg.get("to", "")), actual, clock=self.clock)

    async def close(self) -> None:
        """Close the judges' clients; wait for the judge cache's last entries, and close it."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()
        if self._caller is not None:
            self._caller.close()
            self._caller = None
        if self.cache is not None:
            await asyncio.to_thread(self.cache.close)
