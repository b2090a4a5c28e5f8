"""The workbench's tests: a real store made by the real ``assay run``, a real
``assay serve`` on loopback, and Debian's Chromium driven by Playwright.

``stocked`` makes a project with a suite whose hidden cases carry
``CANARY`` and whose agent answers one case with script and markup
(``HOSTILE``); it runs it twice, the second time with an agent that fixes
one case and breaks another, so compare has flips to show. ``served``
starts ``assay serve --port 0`` on that store and reads the address it
prints. ``page`` is a fresh Chromium page that records console errors and
every Content-Security-Policy violation, so a test can assert there were none.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..cli.conftest import Done, Project, project

__all__ = ["Done", "Project", "project"]

#: Upper case: the agent upper-cases what it echoes, and a leak must still be found.
CANARY = "CANARY-WEB-7F3A"

#: What the agent answers the ``hostile`` case: script, markup, an event handler.
HOSTILE = ('<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
           '[bold red]rich[/] \x1b[31mansi\x1b[0m {{ 7*7 }} </textarea></pre>')

AGENT = '''
import json

def agent(input):
    text = str(input)
    if "hostile" in text:
        return {"reply": HOSTILE}
    if "explode" in text:
        raise RuntimeError("boom")
    return {"reply": text.upper()}

HOSTILE = json.loads(HOSTILE_JSON)
'''.replace("HOSTILE_JSON", repr(json.dumps(HOSTILE)))

#: The second version: fixes ``flaky`` (it answered lower case before) and breaks ``greets``.
AGENT_V2 = AGENT.replace(
    'return {"reply": text.upper()}',
    'return {"reply": text.lower() if "hello" in text or "quiet" in text else text.upper()}')

SUITE = """
suite: web/shop@1
title: The workbench's test suite
target: python:shop_agent:agent
trials: 2
pass_mark: 0.5
hidden: hidden/
cases:
  - id: greets
    input: hello
    expect: [{path: $.reply, equals: HELLO}]
  - id: hostile
    input: hostile
    expect: [{path: $.reply, equals: calm}]
  - id: flaky
    input: quiet please
    expect: [{path: $.reply, equals: quiet please}]
  - id: breaks
    input: explode
    expect: [{path: $.reply, equals: never}]
"""

HIDDEN = f"""
- id: {CANARY}-hidden-id
  input: {CANARY}-hidden-input
  expect: [{{path: $.reply, equals: {CANARY}-expected}}]
- id: {CANARY}-second
  input: {CANARY}-second-input
  expect: [{{path: $.reply, equals: {CANARY}-SECOND-INPUT}}]
"""


@dataclass
class Stocked:
    """A project whose store holds two sealed runs of ``web/shop@1`` (v1, then v2)."""

    project: Project
    first: str
    second: str
    reports: list[dict[str, Any]] = field(default_factory=list)

    @property
    def db(self) -> str:
        return f"sqlite:///{self.project.root / '.assay' / 'assay.db'}"


def write_shop(project: Project, agent: str = AGENT) -> None:
    """The suite, its private hidden cases and the agent, in ``project``."""
    project.write("shop_agent.py", agent)
    project.write("evals/shop.suite.yaml", SUITE)
    project.write("evals/hidden/cases.yaml", HIDDEN)


def run_shop(project: Project, *more: str) -> dict[str, Any]:
    """One sealed run of the shop suite; its JSON report."""
    done = project.assay("run", "evals", "--json", "r.json", *more)
    assert done.code in (0, 1), done.err
    return json.loads((project.root / "r.json").read_text().splitlines()[0])


def make_stocked(project: Project) -> Stocked:
    write_shop(project)
    first = run_shop(project)
    write_shop(project, AGENT_V2)
    second = run_shop(project)
    return Stocked(project, first["run_id"], second["run_id"], [first, second])


@pytest.fixture(scope="session")
def _stocked_template(tmp_path_factory: pytest.TempPathFactory) -> Stocked:
    """The two runs, made once per test process; each test gets a copy of the folder."""
    return make_stocked(Project(tmp_path_factory.mktemp("stocked-template")))


@pytest.fixture
def stocked(_stocked_template: Stocked, project: Project) -> Stocked:
    """A project of its own holding ``_stocked_template``'s files and store, byte for byte.

    Copied, not made again: the runs are the same for every test (their ids
    too), and a test that changes the store changes only its copy. No process
    holds the template's store open, so its SQLite files copy whole.
    """
    shutil.copytree(_stocked_template.project.root, project.root, dirs_exist_ok=True)
    return Stocked(project, _stocked_template.first, _stocked_template.second,
                   json.loads(json.dumps(_stocked_template.reports)))


class Served:
    """A running ``assay serve`` (its address in ``url``), stopped by ``stop``."""

    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None) -> None:
        full_env = {**os.environ, **(env or {})}
        full_env.pop("ASSAY_HIDDEN_DIR", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "assay", "serve", "--port", "0", *args], cwd=root,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env,
            stdin=subprocess.DEVNULL, start_new_session=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # blocks until bound (or dead: empty line)
        if not line.startswith("assay workbench on "):
            self.process.kill()
            raise AssertionError(f"assay serve did not start: {line!r} "
                                 f"{self.process.stderr.read() if self.process.stderr else ''}")
        self.link = line.split()[-1]
        self.url = self.link.split("login?")[0].rstrip("/")
        self.client = httpx.Client(base_url=self.url, timeout=30)

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.get(path, **kwargs)

    def stop(self) -> str:
        """Stop the server (Ctrl-C, as a user would); what it wrote to stderr."""
        import signal

        self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.stderr.read() if self.process.stderr else ""


@pytest.fixture
def served(stocked: Stocked) -> Iterator[Served]:
    server = Served(stocked.project.root, "evals")
    yield server
    server.stop()


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

#: Chromium's flags for this machine: no sandbox (root), and none of its own
#: connections to the network, which is closed here.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]


HERE = Path(__file__).resolve().parent


class Chromium:
    """Playwright's Chromium for this folder's tests, started when a test first asks for it
    and stopped when the tests leave this folder.

    Not simply session-scoped: Playwright's sync API runs its asyncio loop in a
    greenlet of the main thread, and while it lives that loop counts as the
    thread's running loop. Any later test in the same process that calls
    ``asyncio.run`` would fail ("cannot be called from a running event loop").
    So the browser is shared by every test here run one after another (one
    launch per worker when they run together) and is gone before a test of
    another folder starts (``pytest_runtest_teardown`` below).
    """

    def __init__(self) -> None:
        self._playwright: Any = None
        self._browser: Any = None

    def get(self) -> Any:
        if self._browser is None:
            if not Path(CHROMIUM).exists():
                pytest.fail("Debian's chromium is not installed (.ci/run installs it with apt)")
            from playwright.sync_api import sync_playwright

            self._playwright = sync_playwright().start()
            self._browser = self._playwright.chromium.launch(executable_path=CHROMIUM,
                                                             args=CHROMIUM_ARGS)
        return self._browser

    def stop(self) -> None:
        browser, playwright = self._browser, self._playwright
        self._browser = self._playwright = None
        try:
            if browser is not None:
                browser.close()
        finally:
            if playwright is not None:
                playwright.stop()  # ends its loop: the thread has no running loop again


_CHROMIUM = Chromium()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a test here and its fixtures are torn down: stop the browser if the next test
    this process runs is not one of this folder's (or there is none)."""
    try:
        return (yield)
    finally:
        if nextitem is None or not Path(nextitem.path).resolve().is_relative_to(HERE):
            _CHROMIUM.stop()


@pytest.fixture(scope="session")
def _chromium() -> Iterator[Chromium]:
    """The one ``Chromium`` of this process, stopped at the end of the session whatever
    happened (an interrupted run has no next test to leave for)."""
    try:
        yield _CHROMIUM
    finally:
        _CHROMIUM.stop()


@pytest.fixture
def browser(_chromium: Chromium) -> Any:
    return _chromium.get()


@dataclass
class Watched:
    """A browser page and what went wrong on it: console errors, CSP violations."""

    page: Any
    errors: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def clean(self) -> bool:
        return not self.errors and not self.violations


@pytest.fixture
def page(browser: Any) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    tab = context.new_page()
    watched = Watched(tab)
    tab.on("console", lambda message: watched.errors.append(message.text)
           if message.type == "error" else None)
    tab.on("pageerror", lambda error: watched.errors.append(str(error)))
    # A CSP violation is reported as a console error too; this names the directive.
    context.add_init_script(
        "document.addEventListener('securitypolicyviolation', e => "
        "console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI));")
    tab.set_default_timeout(15_000)
    yield watched
    context.close()


def name_versions(stocked: Stocked, name: str = "shop") -> tuple[str, str]:
    """Publish the agent versions of ``stocked``'s two runs under ``name``, first then second
    (each digest is its file's: the agent is written back as it was for each run)."""
    versions = []
    for agent in (AGENT, AGENT_V2):
        stocked.project.write("shop_agent.py", agent)
        done = stocked.project.assay("agent", "publish", "python:shop_agent:agent",
                                     "--name", name)
        assert done.code == 0, done.err
        versions.append(done.out.strip())
    first, second = stocked.reports[0], stocked.reports[1]
    assert versions == [first["target"]["digest"], second["target"]["digest"]]
    return versions[0], versions[1]
