"""One install gives every target; every install hint works from the index and from a clone."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

# What `assay --help` must not load: the SDKs and libraries only a command's work needs.
HEAVY = ("mcp", "openai", "sqlalchemy", "alembic", "rich", "pydantic", "httpx", "yaml",
         "jsonschema", "cryptography")
COMMANDS = ("", "run", "list", "runs", "show", "ledger", "receipt", "replay", "erase")


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()
            for requirement in requirements}


def test_the_core_install_carries_every_target_sdk() -> None:
    core = _names(PROJECT["dependencies"])
    assert {"mcp", "openai"} <= core
    # Extras are for optional parts only; no extra repeats a target SDK.
    extras = PROJECT["optional-dependencies"]
    assert "postgres" in extras
    assert "mcp" not in extras and "openai" not in extras


@pytest.mark.parametrize("command", COMMANDS)
def test_help_loads_no_heavy_module(command: str) -> None:
    argv = [command, "--help"] if command else ["--help"]
    code = (f"import sys\nsys.argv = ['assay', *{argv!r}]\nfrom assay.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert "Usage:" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]"


def _hint_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
             *sorted((ROOT / "src").rglob("*.py")), *sorted((ROOT / "examples").rglob("*"))]
    return [path for path in files if path.is_file()
            and path.suffix in (".md", ".py", ".yaml", ".txt")]


def test_every_extra_named_in_a_hint_exists_and_comes_with_its_clone_form() -> None:
    extras = set(PROJECT["optional-dependencies"])
    seen = 0
    for path in _hint_files():
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"assay\[(\w+)\]", text):
            seen += 1
            assert match.group(1) in extras, f"{path}: assay[{match.group(1)}] is no extra"
            # The clone form stands near the index form.
            near = text[max(0, match.start() - 200):match.end() + 200]
            assert f"-e '.[{match.group(1)}]'" in near, f"{path}: no clone form for {match[0]}"
    assert seen  # the README and the docs do name the postgres extra


def test_a_missing_core_sdk_is_reported_as_a_broken_install_with_both_commands() -> None:
    from assay.install_hints import reinstall

    hint = reinstall("mcp")
    assert "pip install --force-reinstall assay" in hint and "pip install -e ." in hint


def test_a_postgres_store_without_its_driver_names_the_extra_both_ways(tmp_path: Path) -> None:
    # psycopg is installed here; hide it from this one process, as a fresh install lacks it.
    code = ("import sys\nsys.modules['psycopg'] = None\nfrom assay.cli import main\n"
            "main(['runs', '--db', 'postgresql+psycopg://127.0.0.1:1/none'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "pip install 'assay[postgres]'" in done.stderr
    assert "pip install -e '.[postgres]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_another_missing_driver_is_named(tmp_path: Path) -> None:
    code = ("import sys\nsys.modules['pg8000'] = None\nfrom assay.cli import main\n"
            "main(['runs', '--db', 'postgresql+pg8000://127.0.0.1:1/none'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "its driver pg8000 is not installed" in done.stderr
