"""Discovery by convention (SPEC §2): *.suite.yaml and *_eval.py below the given paths."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from assay.errors import SuiteError, UsageError
from assay.suites import discover, find_suite_files, is_suite_file

Write = Callable[[str, str], Path]


def yaml_suite(suite_id: str) -> str:
    return f"suite: {suite_id}\ncases: [{{id: a, expect: [{{equals: 1}}]}}]\n"


def py_suite(suite_id: str) -> str:
    return ("from assay import Case, Suite\n\n"
            f"suite = Suite(id={suite_id!r}, cases=[Case(id='a')])\n")


@pytest.fixture
def tree(write: Write, tmp_path: Path) -> Path:
    write("evals/a.suite.yaml", yaml_suite("ns/a@1"))
    write("evals/sub/deeper/b.suite.yml", yaml_suite("ns/b@1"))
    write("evals/sub/c_eval.py", py_suite("ns/c@1"))
    # Not suites by name:
    write("evals/notes.yaml", "suite: ns/notes@1\n")
    write("evals/helpers.py", "X = 1\n")
    write("evals/evaluation.py", "X = 1\n")
    write("evals/d.suite.yaml.bak", yaml_suite("ns/bak@1"))
    # In folders that are skipped:
    for skipped in (".venv/lib", ".git", "node_modules/pkg", "venv", "__pycache__", ".assay",
                    ".hidden-tool", "sub/node_modules"):
        write(f"evals/{skipped}/x.suite.yaml", yaml_suite("ns/skipped@1"))
        write(f"evals/{skipped}/y_eval.py", "raise RuntimeError('must not be imported')\n")
    return tmp_path / "evals"


def test_is_suite_file() -> None:
    for name in ("a.suite.yaml", "a.suite.yml", "x_eval.py", "dir/deep_eval.py"):
        assert is_suite_file(Path(name)), name
    for name in ("a.yaml", "suite.yaml", "a.suite.json", "eval.py", "x_eval.pyc", "x_evals.py",
                 "a.suite.yaml.bak"):
        assert not is_suite_file(Path(name)), name


def test_finds_yaml_and_python_suites_recursively_and_skips_tool_folders(tree: Path) -> None:
    found = find_suite_files([tree])
    assert [p.relative_to(tree).as_posix() for p in found] == [
        "a.suite.yaml",
        "sub/c_eval.py",
        "sub/deeper/b.suite.yml",
    ]


def test_discover_loads_every_suite_found(tree: Path) -> None:
    loaded = discover([tree])
    assert [item.suite.id for item in loaded] == ["ns/a@1", "ns/c@1", "ns/b@1"]
    assert [item.path.name for item in loaded] == ["a.suite.yaml", "c_eval.py", "b.suite.yml"]


def test_a_root_that_is_itself_in_a_dot_folder_is_still_searched(write: Write,
                                                                  tmp_path: Path) -> None:
    write(".config/evals/a.suite.yaml", yaml_suite("ns/a@1"))
    found = find_suite_files([tmp_path / ".config" / "evals"])
    assert [p.name for p in found] == ["a.suite.yaml"]


def test_a_file_path_is_taken_as_is(tree: Path) -> None:
    found = find_suite_files([tree / "a.suite.yaml"])
    assert found == [tree / "a.suite.yaml"]


def test_the_same_file_given_twice_is_found_once(tree: Path) -> None:
    found = find_suite_files([tree, tree / "a.suite.yaml", tree / "sub" / ".." / "a.suite.yaml"])
    assert [p.name for p in found] == ["a.suite.yaml", "c_eval.py", "b.suite.yml"]
    assert [item.suite.id for item in discover([tree, tree / "a.suite.yaml"])] == [
        "ns/a@1", "ns/c@1", "ns/b@1"]


def test_several_roots_keep_their_order(write: Write, tmp_path: Path) -> None:
    write("one/z.suite.yaml", yaml_suite("ns/z@1"))
    write("two/a.suite.yaml", yaml_suite("ns/a@1"))
    found = find_suite_files([tmp_path / "two", tmp_path / "one"])
    assert [p.name for p in found] == ["a.suite.yaml", "z.suite.yaml"]


def test_an_empty_folder_finds_nothing(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert find_suite_files([tmp_path / "empty"]) == []
    assert discover([tmp_path / "empty"]) == []


def test_a_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(UsageError) as info:
        find_suite_files([missing])
    assert str(info.value) == f"{missing}: no such file or folder"
    assert info.value.exit_code == 2
    with pytest.raises(UsageError):
        discover([tmp_path, missing])


def test_two_files_defining_the_same_suite_id_are_refused(write: Write, tmp_path: Path) -> None:
    first = write("evals/a.suite.yaml", yaml_suite("ns/same@1"))
    second = write("evals/b_eval.py", py_suite("ns/same@1"))
    with pytest.raises(UsageError) as info:
        discover([tmp_path / "evals"])
    message = str(info.value)
    assert message == f"{second}: suite ns/same@1 is also defined in {first}"


def test_the_same_name_at_another_major_version_is_a_different_suite(
    write: Write, tmp_path: Path
) -> None:
    write("evals/a.suite.yaml", yaml_suite("ns/same@1"))
    write("evals/b.suite.yaml", yaml_suite("ns/same@2"))
    assert [s.suite.id for s in discover([tmp_path / "evals"])] == ["ns/same@1", "ns/same@2"]


def test_a_bad_file_stops_discovery_with_its_file_and_line(write: Write, tmp_path: Path) -> None:
    write("evals/a.suite.yaml", yaml_suite("ns/a@1"))
    bad = write("evals/b.suite.yaml",
                "suite: ns/b@1\ncases:\n  - id: x\n    expect: [{equls: 1}]\n")
    with pytest.raises(SuiteError) as info:
        discover([tmp_path / "evals"])
    assert (info.value.file, info.value.line) == (str(bad), 4)
    assert info.value.message == "unknown assertion 'equls' (did you mean 'equals'?)"


def test_discover_passes_the_hidden_root_on(write: Write, tmp_path: Path) -> None:
    write("evals/a.suite.yaml", yaml_suite("ns/a@1"))
    write("private/ns/a@1/h.yaml", "id: secret\n")
    [plain] = discover([tmp_path / "evals"])
    [private] = discover([tmp_path / "evals"], tmp_path / "private")
    assert plain.hidden_source is None
    assert private.hidden_source == "private"
    assert [c.id for c in private.suite.hidden_cases()] == ["secret"]
