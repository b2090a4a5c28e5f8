"""docs/your-agent.md, run as written: framework agents evaluated as they are (SPEC §15).

The page cannot run in the plain page runner's empty folder (tests/docs/test_pages.py):
its agents talk to a model. This test runs it with the same runner
(``tests/docs/pages.py``), after giving the page what its reader has before reading it:

- the frameworks installed in the Python that runs assay (the ``[frameworks]`` extra
  of this venv), and the ``openai`` npm package where Node finds it from the page's
  folder (a ``node_modules`` there, as ``npm install openai`` would leave it);
- a provider key in ``OPENAI_API_KEY`` and ``ANTHROPIC_API_KEY``. No command may
  print it, no store may keep it, and every request the model received carries it:
  the ``python:`` agents' own SDKs send it, and the recording proxy puts it on an
  ``exec:`` agent's calls in place of the stand-in the program holds;
- the model the page names: ``tests/model_server.py`` on 127.0.0.1:8781, which
  plays by the rule the page states (its conversations carry no ``SCRIPT:``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.docs.pages import Command, Page

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model_server import ModelServer  # noqa: E402

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "your-agent.md"
NODE_MODULES = ROOT / ".hosts" / "node_modules"
PORT = 8781
KEY = "sk-CANARY-YOUR-AGENT-PAGE-5d1c"
STAND_IN = "assay-stand-in-key"


class Watched(Page):
    """The page runner, keeping everything the page's commands printed."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.printed: list[str] = []

    def _check(self, cmd: Command, printed: str) -> None:
        self.printed.append(f"$ {cmd.line}\n{printed}")
        super()._check(cmd, printed)


@pytest.fixture
def page(tmp_path: Path) -> Iterator[tuple[Watched, ModelServer]]:
    root = tmp_path / "page"
    root.mkdir()
    (root / "node_modules").symlink_to(NODE_MODULES, target_is_directory=True)
    runner = Watched(root)
    runner.env.update(OPENAI_API_KEY=KEY, ANTHROPIC_API_KEY=KEY)
    with ModelServer(PORT) as model:
        yield runner, model


def test_the_page_runs_as_written(page: tuple[Watched, ModelServer]) -> None:
    runner, model = page
    runner.run(PAGE.read_text(encoding="utf-8"))
    printed = "\n".join(runner.printed)
    assert "assay run" in printed and KEY not in printed

    # Every API the page's agents speak was called, and each call carried the real key,
    # never the stand-in an exec: agent holds.
    paths = {r["path"].split("?")[0] for r in model.requests}
    assert {"/v1/responses", "/v1/chat/completions", "/v1/messages"} <= paths, paths
    keys = [json.dumps(r["headers"]) for r in model.requests]
    assert keys and all(KEY in k and STAND_IN not in k for k in keys)

    # The runs were stored (their traces hold the served model) without the key.
    stored = b"".join(p.read_bytes() for p in runner.root.rglob(".assay/*") if p.is_file())
    assert b"served-model-1" in stored and KEY.encode() not in stored
