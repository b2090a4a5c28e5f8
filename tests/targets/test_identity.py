"""The agent version: what a target's identity covers, and what it leaves out."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.targets import TargetOptions, make_target
from assay.targets.identity import changes, identity_digest


@pytest.fixture
def agent_dir(tmp_path: Path) -> Iterator[Path]:
    """A package agent: pkg/agent.py imports a sibling relatively, a helper lazily."""
    root = tmp_path / "agents"
    (root / "idpkg" / "sub").mkdir(parents=True)
    (root / "idpkg" / "__init__.py").write_text("")
    (root / "idpkg" / "sub" / "__init__.py").write_text("")
    (root / "idpkg" / "sub" / "agent.py").write_text(
        "import json\nimport yaml\nfrom . import rules\n\n"
        "def agent(input):\n    from idpkg import lazy_helper\n"
        "    return {'n': rules.N + lazy_helper.M}\n")
    (root / "idpkg" / "sub" / "rules.py").write_text("N = 1\n")
    (root / "idpkg" / "lazy_helper.py").write_text("M = 2\n")
    (root / "idpkg" / "unrelated.py").write_text("X = 3\n")
    yield root
    for name in [m for m in sys.modules if m == "idpkg" or m.startswith("idpkg.")]:
        del sys.modules[name]
    if str(root.resolve()) in sys.path:
        sys.path.remove(str(root.resolve()))


def started_identity(uri: str, base: Path) -> dict[str, str]:
    target = make_target(uri, TargetOptions(base_dir=base))

    async def go() -> dict[str, str]:
        await target.start()
        try:
            return target.identity()
        finally:
            await target.close()

    return asyncio.run(go())


def test_a_python_agent_is_its_module_and_the_local_modules_it_imports(agent_dir: Path) -> None:
    identity = started_identity("python:idpkg.sub.agent:agent", agent_dir)
    # Relative, lazy and package __init__ imports are covered; stdlib, installed
    # packages (yaml) and local files it never imports are not.
    assert set(identity) == {
        "uri", "file idpkg/__init__.py", "file idpkg/sub/__init__.py",
        "file idpkg/sub/agent.py", "file idpkg/sub/rules.py", "file idpkg/lazy_helper.py"}
    assert all(v.startswith("sha256:") for k, v in identity.items() if k != "uri")

    (agent_dir / "idpkg" / "unrelated.py").write_text("X = 4\n")
    assert started_identity("python:idpkg.sub.agent:agent", agent_dir) == identity
    (agent_dir / "idpkg" / "lazy_helper.py").write_text("M = 3\n")
    edited = started_identity("python:idpkg.sub.agent:agent", agent_dir)
    assert changes(identity, edited) == ["file idpkg/lazy_helper.py changed"]
    assert identity_digest(edited) != identity_digest(identity)


def test_an_installed_agent_is_its_distribution_and_version() -> None:
    from importlib.metadata import version

    identity = started_identity("python:yaml:safe_load", Path.cwd())
    assert identity == {"uri": "python:yaml:safe_load", "distribution PyYAML": version("PyYAML")}


def test_before_start_a_python_target_is_its_uri_alone(agent_dir: Path) -> None:
    target = make_target("python:idpkg.sub.agent:agent", TargetOptions(base_dir=agent_dir))
    assert target.identity() == {"uri": "python:idpkg.sub.agent:agent"}


def test_an_openai_target_is_its_model_and_server_without_credentials() -> None:
    target = make_target("openai:m-1", TargetOptions(
        base_url="http://user:secret@127.0.0.1:9/v1"))
    identity = target.identity()
    assert identity == {"uri": "openai:m-1", "model": "m-1",
                        "base_url": "http://127.0.0.1:9/v1"}
    assert "secret" not in target.digest() and target.digest() == identity_digest(identity)


def test_changes_name_parts_that_came_went_or_changed() -> None:
    assert changes({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"}) == [
        "b changed", "c is new"]
    assert changes({"a": "1"}, {}) == ["a is gone"]


def test_a_claude_plugin_is_part_of_the_agent_file_by_file_and_an_added_folder_is_not(
        tmp_path: Path) -> None:
    """``--plugin-dir`` names the plugin under test: an edited skill is another agent."""
    skill = tmp_path / "shop" / "skills" / "refund-policy" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("Refund within 30 days.\n")
    manifest = tmp_path / "shop" / ".claude-plugin" / "plugin.json"
    manifest.parent.mkdir()
    manifest.write_text('{"name": "shop"}')
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "orders.csv").write_text("A-1\n")

    def identity() -> dict[str, str]:
        uri = "claude --plugin-dir shop --add-dir data"
        return make_target(uri, TargetOptions(base_dir=tmp_path)).identity()

    before = identity()
    assert sorted(k for k in before if k.startswith("file ")) == [
        f"file {manifest.resolve().as_posix()}", f"file {skill.resolve().as_posix()}"]
    skill.write_text("Never refund.\n")
    after = identity()
    assert changes(before, after) == [f"file {skill.resolve().as_posix()} changed"]
    # A folder the CLI may read (--add-dir) is data, like a fixture: not the agent.
    (tmp_path / "data" / "orders.csv").write_text("A-2\n")
    assert identity() == after


def test_a_huge_plugin_folder_is_read_to_a_bound_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assay.targets import identity

    monkeypatch.setattr(identity, "MAX_FOLDER_FILES", 2)
    for name in ("a", "b", "c"):
        (tmp_path / name).write_text(name)
    found = identity.folder_entries(tmp_path)
    assert sorted(found) == [f"file {tmp_path / 'a'}", f"file {tmp_path / 'b'}",
                             f"folder {tmp_path}"]
    assert found[f"folder {tmp_path}"] == "more than 2 files: the rest not read"
