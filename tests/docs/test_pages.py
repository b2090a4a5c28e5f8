"""The newcomer's pages in docs/: every file they show is written, every command run.

How a page is read and checked is in ``pages``; each page runs in a folder
of its own, so they run in parallel.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .pages import Page, match, steps

DOCS = Path(__file__).resolve().parents[2] / "docs"
#: Guide pages run by a test of their own.
OWN_TEST = {"assertions.md": "tests/docs/test_assertions_doc.py",
            "ci.md": "tests/cli/test_ci_doc.py", "hosts.md": "tests/hosts/test_hosts_doc.py",
            "your-agent.md": "tests/frameworks/test_guide_doc.py",
            "tau2.md": "tests/imports/test_tau2_doc.py"}


def guide() -> list[str]:
    """The pages docs/README.md lists under "The guide", in reading order."""
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    part = index.split("## The guide", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"\]\(([\w-]+\.md)\)", part)


PAGES = [name for name in guide() if name not in OWN_TEST]


@pytest.mark.parametrize("name", PAGES)
def test_the_page_runs_as_written(name: str, tmp_path: Path) -> None:
    text = (DOCS / name).read_text(encoding="utf-8")
    assert any(not hasattr(step, "text") for step in steps(text)), "a page with no command"
    Page(tmp_path).run(text)


def test_every_guide_page_is_run_by_a_test() -> None:
    root = DOCS.parent
    assert len(guide()) >= 10 and "quickstart.md" in PAGES
    assert [t for t in OWN_TEST.values() if not (root / t).is_file()] == []


def test_no_two_pages_listen_on_one_port() -> None:
    """Pages run side by side (xdist): a port two of them use would fail one at random."""
    owner: dict[str, str] = {}
    clashes = []
    for name in guide():
        for port in set(re.findall(r"127\.0\.0\.1:(\d+)", (DOCS / name).read_text("utf-8"))):
            if port in owner:
                clashes.append((port, owner[port], name))
            owner[port] = name
    assert len(owner) >= 5 and clashes == []


def test_shown_output_must_be_printed_in_order() -> None:
    printed = "run 2026-x ok\nhidden 1\npublic 3\n"
    assert match(["public 3", "hidden 1"], printed) == "not printed (in this order): 'hidden 1'"
    assert match(["run {RUN} ok", "…", "public  3"], printed) == {"RUN": "2026-x"}
    assert isinstance(match(["public 4"], printed), str)
    assert isinstance(match(["run … no"], printed), str)


def test_a_command_is_held_to_its_exit_code(tmp_path: Path) -> None:
    page = "```console\n$ false   # exit 1: it fails\n$ true\n```\n"
    Page(tmp_path).run(page)
    with pytest.raises(AssertionError, match="exited 0, the page says 1"):
        Page(tmp_path).run("```console\n$ true  # exit 1\n```\n")


def test_a_block_that_runs_nowhere_is_refused() -> None:
    with pytest.raises(AssertionError, match="neither a console nor a file"):
        steps("```yaml\nsuite: x\n```\n")


def test_values_flow_from_shown_output_to_later_commands(tmp_path: Path) -> None:
    page = ("```console\n$ echo run r-42 sealed\nrun {RUN} sealed\n"
            "$ export WHERE=$PWD/out-$RUN\n$ echo $WHERE\n$PWD/out-$RUN\n```\n")
    Page(tmp_path).run(page.replace("$PWD", str(tmp_path)))
    with pytest.raises(AssertionError, match="not printed"):
        Page(tmp_path).run(page.replace("$PWD/out-$RUN\n```", "out-r-41\n```"))
