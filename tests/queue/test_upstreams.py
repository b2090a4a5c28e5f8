"""A queued ``exec:`` battery's model calls reach the upstream the run was started with.

The agent is a plain ``openai`` SDK tool loop run as ``exec:`` by real ``assay
worker`` processes; its calls go through each worker's recording proxy to the
scripted model (``tests/model_server.py``) on loopback. The upstream's URL
travels with the run; its key never does: each worker adds the one in its own
environment, and no key is in any row of the database.
"""

from __future__ import annotations

import json
import shlex
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from .conftest import Project

sys.path.insert(0, str(Path(__file__).parent.parent))

from model_server import SERVED, ModelServer  # noqa: E402

WORKER_KEY = "sk-WORKER-CANARY-7d21"
SUBMITTER_KEY = "sk-SUBMITTER-CANARY-90ce"

AGENT = '''
"""A tool loop on the openai SDK alone: input as JSON on stdin, the answer on stdout."""
import json
import sys

from openai import OpenAI

TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Look an order up.",
    "parameters": {"type": "object", "properties": {"order": {"type": "string"}}}}}]

client = OpenAI(max_retries=0)
messages = [{"role": "user", "content": json.load(sys.stdin)}]
while True:
    message = client.chat.completions.create(model="gpt-4.1", messages=messages,
                                             tools=TOOLS).choices[0].message
    if not message.tool_calls:
        print(json.dumps(message.content))
        break
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls:
        order = json.loads(call.function.arguments)["order"]
        messages.append({"role": "tool", "tool_call_id": call.id,
                         "content": f"order {order} has shipped"})
'''

SCRIPT = json.dumps([{"call": "lookup", "args": {"order": "A-1"}}, {"say": "A-1 has shipped."}])

SUITE = f"""
suite: q/upstream@1
target: exec:{shlex.quote(sys.executable)} agent.py
cases:
  - id: looks-up
    input: 'Where is A-1? SCRIPT:{SCRIPT}'
    expect:
      - calls: {{tool: lookup, args: {{order: A-1}}, times: 1}}
      - within_steps: 2
      - contains: shipped
  - id: looks-up-again
    input: 'And A-1 again? SCRIPT:{SCRIPT}'
    expect:
      - calls: {{tool: lookup, args: {{order: A-1}}}}
      - contains: shipped
"""


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


def nowhere() -> str:
    """A loopback base URL nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def write(project: Project) -> None:
    project.write("evals/agent.py", AGENT)
    project.write("evals/upstream.suite.yaml", SUITE)


def database_text(url: str) -> str:
    """Every row of every table of the store's database (the queue's included), as text."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            tables = connection.execute(sa.text(
                "SELECT table_schema, table_name FROM information_schema.tables "
                "WHERE table_type = 'BASE TABLE' "
                "AND table_schema NOT IN ('pg_catalog', 'information_schema')")).all()
            rows = [str(row) for schema, name in tables
                    for row in connection.execute(sa.text(f'SELECT t::text FROM "{schema}".'
                                                          f'"{name}" t')).scalars()]
    finally:
        engine.dispose()
    # The run, its chunks, jobs, trials, ledger entries: a dump of nothing proves nothing.
    assert len(rows) > 10
    return "\n".join(rows)


def passed(project: Project, done: Any) -> dict[str, Any]:
    assert done.code == 0, done.out[-2000:] + done.err[-2000:]
    report: dict[str, Any] = json.loads((project.root / "q.json").read_text())
    assert report["seal"] is not None
    assert [c["outcome"] for c in report["cases"]] == ["pass", "pass"]
    # Facts only the wire gave: the served model, and the tool call.
    assert {c["facets"].get("model") for c in report["cases"]} == {SERVED}
    return report


@pytest.mark.real
def test_a_queued_exec_run_goes_to_the_upstream_it_was_started_with(
        project: Project, model: ModelServer) -> None:
    write(project)
    # The worker's environment names another place: the run's own URL wins there.
    project.worker(env={"OPENAI_API_KEY": WORKER_KEY, "OPENAI_BASE_URL": nowhere()})
    done = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                         "--upstream-openai", f"{model.url}/v1", "--json", "q.json",
                         env={"OPENAI_API_KEY": SUBMITTER_KEY, "OPENAI_BASE_URL": nowhere()})
    passed(project, done)
    # Four model calls (two per trial), each with the worker's key, added by its proxy.
    assert len(model.requests) == 4
    for request in model.requests:
        assert request["headers"].get("authorization") == f"Bearer {WORKER_KEY}"
    # The URL travelled in the run's options; neither key is in any row.
    stored = database_text(project.url)
    assert f"{model.url}/v1" in stored
    assert WORKER_KEY not in stored and SUBMITTER_KEY not in stored
    said = done.out + done.err + "".join(p.read_text() for p in project.root.glob("p*.*"))
    assert WORKER_KEY not in said and SUBMITTER_KEY not in said


@pytest.mark.real
def test_a_run_started_without_one_takes_the_workers_upstream(
        project: Project, model: ModelServer) -> None:
    write(project)
    project.worker(env={"OPENAI_API_KEY": WORKER_KEY, "OPENAI_BASE_URL": nowhere(),
                        "ASSAY_UPSTREAM_OPENAI": f"{model.url}/v1"})
    # The submitter's environment names a model nobody serves: it does not travel.
    done = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                         "--json", "q.json", env={"OPENAI_BASE_URL": nowhere()})
    passed(project, done)
    assert len(model.requests) == 4
    assert all(r["headers"].get("authorization") == f"Bearer {WORKER_KEY}"
               for r in model.requests)


def test_an_upstream_url_with_a_key_in_it_is_not_queued(project: Project) -> None:
    write(project)
    for url, said in (("http://me:hunter2-secret@127.0.0.1:9/v1", "user:password@"),
                      ("http://127.0.0.1:9/v1?api_key=hunter2-secret", "api_key=")):
        done = project.assay("run", "evals", "--db", project.url, "--executor", "queue",
                             "--upstream-openai", url, "--detach")
        assert done.code == 2, done.out + done.err
        assert "--upstream-openai" in done.err and said in done.err
        assert "OPENAI_API_KEY" in done.err and "Traceback" not in done.err
        assert "hunter2" not in done.out + done.err
    # Nothing was registered: no run, no job.
    engine = sa.create_engine(project.url)
    try:
        with engine.connect() as connection:
            has_runs = connection.scalar(sa.text("SELECT to_regclass('public.runs')"))
            runs = connection.scalar(sa.text("SELECT count(*) FROM runs")) if has_runs else 0
    finally:
        engine.dispose()
    assert runs == 0
