"""Graders (SPEC §3): ``module:function`` and ``./script.py`` reading the trace on stdin."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from assay.checks import REGISTRY, LoadContext, verdict
from assay.model import Assertion, Trace


def grader_assertion(spec: str, base: Path) -> Assertion:
    """A grader assertion written in a suite file that lives in ``base``."""
    REGISTRY["grader"].prepare(spec, LoadContext(base_dir=base))
    return Assertion(check="grader", arg=spec, file=str(base / "x.suite.yaml"))


def test_grader_is_registered_as_a_blocking_output_check_without_path() -> None:
    check = REGISTRY["grader"]
    assert (check.family, check.fact, check.takes_path, check.blocking) == (
        "output", "output", False, True)


# --- module:function ---------------------------------------------------------------------

MODULE = """
def judge(trace):
    return {answer}
"""


@pytest.mark.parametrize(
    ("answer", "outcome", "note"),
    [
        ("trace.output == 42", "pass", ""),
        ("trace.output != 42", "fail", ""),
        ("(trace.output == 42, 'the answer is ' + str(trace.output))", "pass", "the answer is 42"),
        ("(False, 'not even')", "fail", "not even"),
        ("'pass'", "pass", ""),
        ("'fail'", "fail", ""),
        ("'inconclusive'", "inconclusive", ""),
        ("{'outcome': 'fail', 'note': 'too short'}", "fail", "too short"),
        ("{'outcome': 'pass'}", "pass", ""),
        ("{'outcome': 'inconclusive', 'note': 7}", "inconclusive", "7"),
    ],
)
def test_module_grader_answers(
    write_module: Callable[[str], str],
    module_dir: Path,
    make_trace: Callable[..., Trace],
    answer: str,
    outcome: str,
    note: str,
) -> None:
    name = write_module(MODULE.format(answer=answer))
    a = grader_assertion(f"{name}:judge", module_dir)
    v = verdict(a, make_trace(42))
    assert (v.outcome, v.note) == (outcome, note)
    assert v.provenance == f"grader:{name}:judge"
    assert v.check == "grader"


@pytest.mark.parametrize(
    "answer",
    ["None", "1", "'PASS'", "'ok'", "{'outcome': 'maybe'}", "{'note': 'x'}", "[True]",
     "(True, 'a', 'b')", "object()"],
)
def test_module_grader_answering_out_of_form_is_inconclusive(
    write_module: Callable[[str], str],
    module_dir: Path,
    make_trace: Callable[..., Trace],
    answer: str,
) -> None:
    name = write_module(MODULE.format(answer=answer))
    v = verdict(grader_assertion(f"{name}:judge", module_dir), make_trace(42))
    assert (v.outcome, v.note) == ("inconclusive", "grader answered out of form")


def test_module_grader_that_raises_is_inconclusive_and_says_why(
    write_module: Callable[[str], str], module_dir: Path, make_trace: Callable[..., Trace]
) -> None:
    name = write_module("def judge(trace):\n    raise RuntimeError('judge exploded')\n")
    v = verdict(grader_assertion(f"{name}:judge", module_dir), make_trace(42))
    assert v.outcome == "inconclusive"
    assert v.note == "grader raised RuntimeError: judge exploded"


def test_module_grader_receives_the_trace_object(
    write_module: Callable[[str], str], module_dir: Path, make_trace: Callable[..., Trace]
) -> None:
    name = write_module(
        "from assay.model import Trace\n"
        "def judge(trace):\n"
        "    assert isinstance(trace, Trace)\n"
        "    return True, f'{trace.status}:{trace.output[\"n\"]}'\n"
    )
    v = verdict(grader_assertion(f"{name}:judge", module_dir), make_trace({"n": 5},
                                                                          status="error"))
    assert (v.outcome, v.note) == ("pass", "error:5")


def test_module_grader_with_dotted_attribute(
    write_module: Callable[[str], str], module_dir: Path, make_trace: Callable[..., Trace]
) -> None:
    name = write_module(
        "class Graders:\n"
        "    @staticmethod\n"
        "    def even(trace):\n"
        "        return trace.output % 2 == 0\n"
    )
    a = grader_assertion(f"{name}:Graders.even", module_dir)
    assert verdict(a, make_trace(4)).outcome == "pass"
    assert verdict(a, make_trace(5)).outcome == "fail"


def test_module_grader_is_still_subject_to_evidence(
    write_module: Callable[[str], str], module_dir: Path, make_trace: Callable[..., Trace]
) -> None:
    name = write_module("def judge(trace):\n    return True\n")
    v = verdict(grader_assertion(f"{name}:judge", module_dir), make_trace(1, evidence="inferred"))
    assert v.outcome == "inconclusive"


def test_module_grader_is_imported_from_the_suite_folder(
    tmp_path: Path, make_trace: Callable[..., Trace], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not on sys.path beforehand: the suite's folder is made importable, like pytest's rootdir.
    folder = tmp_path / "suite_here"
    folder.mkdir()
    name = "grader_mod_from_suite_folder_" + tmp_path.name.replace("-", "_")
    (folder / f"{name}.py").write_text("def ok(trace):\n    return 'pass'\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    try:
        a = grader_assertion(f"{name}:ok", folder)
        assert verdict(a, make_trace(1)).outcome == "pass"
    finally:
        sys.modules.pop(name, None)


# --- prepare (load time) --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "expects module:function or a ./path/to/script"),
        (None, "expects module:function or a ./path/to/script"),
        (3, "expects module:function or a ./path/to/script"),
        ("justamodule", "grader 'justamodule' is not of the form module:function"),
        ("./missing.py", "grader script './missing.py' does not exist"),
        ("graders/missing.py", "grader script 'graders/missing.py' does not exist"),
        ("no_such_module_xyz_123:judge",
         "grader cannot import 'no_such_module_xyz_123': ModuleNotFoundError"),
    ],
)
def test_prepare_refuses_bad_grader_specs(tmp_path: Path, spec: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        REGISTRY["grader"].prepare(spec, LoadContext(base_dir=tmp_path))
    assert str(info.value).startswith(message), str(info.value)


def test_prepare_refuses_a_missing_function_and_a_non_callable(
    write_module: Callable[[str], str], module_dir: Path
) -> None:
    name = write_module("VALUE = 3\n")
    prepare = REGISTRY["grader"].prepare
    with pytest.raises(ValueError, match=rf"^grader module '{name}' has no 'judge'$"):
        prepare(f"{name}:judge", LoadContext(base_dir=module_dir))
    with pytest.raises(ValueError, match=rf"^grader '{name}:VALUE' is not callable$"):
        prepare(f"{name}:VALUE", LoadContext(base_dir=module_dir))


def test_prepare_refuses_a_module_that_fails_to_import(
    write_module: Callable[[str], str], module_dir: Path
) -> None:
    name = write_module("raise ImportError('needs numpy')\n")
    with pytest.raises(ValueError, match=rf"^grader cannot import '{name}': ImportError: needs"):
        REGISTRY["grader"].prepare(f"{name}:judge", LoadContext(base_dir=module_dir))


# --- scripts ----------------------------------------------------------------------------------

SCRIPT_HEAD = "import json, sys\ntrace = json.load(sys.stdin)\n"


def script(folder: Path, body: str, name: str = "grade.py") -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SCRIPT_HEAD + body, encoding="utf-8")
    return path


def test_script_grader_reads_the_trace_as_json_on_stdin_and_passes(
    tmp_path: Path, make_trace: Callable[..., Trace]
) -> None:
    script(tmp_path, (
        "ok = trace['output']['answer'] == 5 and trace['status'] == 'ok'\n"
        "note = 'steps=%s' % trace['steps']\n"
        "print(json.dumps({'outcome': 'pass' if ok else 'fail', 'note': note}))\n"
    ), name="graders/answer.py")
    a = grader_assertion("./graders/answer.py", tmp_path)
    v = verdict(a, make_trace({"answer": 5}, steps=3))
    assert (v.outcome, v.note) == ("pass", "steps=3")
    assert v.provenance == "grader:./graders/answer.py"
    v = verdict(a, make_trace({"answer": 6}, steps=1))
    assert (v.outcome, v.note) == ("fail", "steps=1")


def test_script_grader_fail(tmp_path: Path, make_trace: Callable[..., Trace]) -> None:
    script(tmp_path, "print(json.dumps({'outcome': 'fail', 'note': 'no table'}))\n")
    v = verdict(grader_assertion("./grade.py", tmp_path), make_trace("x"))
    assert (v.outcome, v.note) == ("fail", "no table")


def test_script_grader_reads_the_last_non_empty_line(
    tmp_path: Path, make_trace: Callable[..., Trace]
) -> None:
    script(tmp_path, (
        "print('thinking about it...')\n"
        "print(json.dumps({'outcome': 'pass', 'note': 'fine'}))\n"
        "print()\n"
    ))
    v = verdict(grader_assertion("./grade.py", tmp_path), make_trace("x"))
    assert (v.outcome, v.note) == ("pass", "fine")


def test_script_grader_with_nonzero_exit_is_inconclusive_even_if_it_printed_pass(
    tmp_path: Path, make_trace: Callable[..., Trace]
) -> None:
    script(tmp_path, "print(json.dumps({'outcome': 'pass'}))\nsys.exit(3)\n")
    v = verdict(grader_assertion("./grade.py", tmp_path), make_trace("x"))
    assert (v.outcome, v.note) == ("inconclusive", "grader script exited 3")


def test_script_grader_that_crashes_is_inconclusive(
    tmp_path: Path, make_trace: Callable[..., Trace]
) -> None:
    script(tmp_path, "raise SystemExit('broken')\n")
    v = verdict(grader_assertion("./grade.py", tmp_path), make_trace("x"))
    assert (v.outcome, v.note) == ("inconclusive", "grader script exited 1")


@pytest.mark.parametrize("printed", ["'pass'", "'looks good to me'", "'{outcome: pass}'"])
def test_script_grader_printing_no_json_is_inconclusive(
    tmp_path: Path, make_trace: Callable[..., Trace], printed: str
) -> None:
    script(tmp_path, f"print({printed})\n")
    v = verdict(grader_assertion("./grade.py", tmp_path), make_trace("x"))
    assert (v.outcome, v.note) == ("inconclusive", "grader script printed no JSON answer")


def test_script_grader_printing_nothing_is_inconclusive(
    tmp_path: Path, make_trace: Callable[..., Trace]
) -> None:
    script(tmp_path, "")
    v = verdict(grader_assertion("./grade.py", tmp_path), make_trace("x"))
    assert v.outcome == "inconclusive"
    assert v.note in ("grader answered out of form", "grader script printed no JSON answer")


@pytest.mark.parametrize("answer", ['{"outcome": "maybe"}', "[1, 2]", '{"note": "x"}', '"PASS"'])
def test_script_grader_printing_json_out_of_form_is_inconclusive(
    tmp_path: Path, make_trace: Callable[..., Trace], answer: str
) -> None:
    script(tmp_path, f"print({answer!r})\n")
    v = verdict(grader_assertion("./grade.py", tmp_path), make_trace("x"))
    assert (v.outcome, v.note) == ("inconclusive", "grader answered out of form")


def test_script_grader_runs_in_its_own_folder(
    tmp_path: Path, make_trace: Callable[..., Trace]
) -> None:
    (tmp_path / "graders").mkdir()
    (tmp_path / "graders" / "expected.txt").write_text("42")
    script(tmp_path, (
        "import pathlib\n"
        "want = pathlib.Path('expected.txt').read_text()\n"
        "print(json.dumps({'outcome': 'pass' if str(trace['output']) == want else 'fail'}))\n"
    ), name="graders/cwd.py")
    a = grader_assertion("./graders/cwd.py", tmp_path)
    assert verdict(a, make_trace(42)).outcome == "pass"
    assert verdict(a, make_trace(41)).outcome == "fail"


def test_script_grader_is_found_relative_to_the_suite_file_not_the_cwd(
    tmp_path: Path, make_trace: Callable[..., Trace], monkeypatch: pytest.MonkeyPatch
) -> None:
    suite_dir = tmp_path / "suite"
    script(suite_dir, "print(json.dumps({'outcome': 'pass'}))\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    a = grader_assertion("./grade.py", suite_dir)
    monkeypatch.chdir(elsewhere)
    assert verdict(a, make_trace("x")).outcome == "pass"


def test_script_grader_receives_the_whole_trace(
    tmp_path: Path, make_trace: Callable[..., Trace]
) -> None:
    dump = tmp_path / "seen.json"
    script(tmp_path, (
        f"open({str(dump)!r}, 'w').write(json.dumps(trace))\n"
        "print(json.dumps({'outcome': 'pass'}))\n"
    ))
    trace = make_trace({"a": [1, 2]}, status="refused", error="nope", steps=2)
    assert verdict(grader_assertion("./grade.py", tmp_path), trace).outcome == "pass"
    seen = json.loads(dump.read_text())
    assert seen == json.loads(trace.model_dump_json())
    assert seen["output"] == {"a": [1, 2]} and seen["status"] == "refused"


def test_an_executable_non_python_script_runs_directly(
    tmp_path: Path, make_trace: Callable[..., Trace]
) -> None:
    sh = tmp_path / "grade.sh"
    sh.write_text("#!/bin/sh\ncat > /dev/null\necho '{\"outcome\": \"fail\", \"note\": \"sh\"}'\n")
    sh.chmod(0o755)
    v = verdict(grader_assertion("./grade.sh", tmp_path), make_trace("x"))
    assert (v.outcome, v.note) == ("fail", "sh")


def test_a_script_that_cannot_start_is_inconclusive(
    tmp_path: Path, make_trace: Callable[..., Trace]
) -> None:
    sh = tmp_path / "grade.sh"
    sh.write_text("#!/bin/sh\necho '{\"outcome\": \"pass\"}'\n")
    sh.chmod(0o644)  # not executable
    v = verdict(grader_assertion("./grade.sh", tmp_path), make_trace("x"))
    assert v.outcome == "inconclusive"
    assert v.note.startswith("grader script could not start: ")


def test_a_script_that_never_answers_is_cut_off_and_inconclusive(
    tmp_path: Path, make_trace: Callable[..., Trace], monkeypatch: pytest.MonkeyPatch
) -> None:
    from assay.checks import graders

    monkeypatch.setattr(graders, "GRADER_TIMEOUT_S", 1.0)
    # Blocks on an event nobody sets: the timeout, not a sleep, ends it.
    script(tmp_path, "import threading\nthreading.Event().wait()\n")
    v = verdict(grader_assertion("./grade.py", tmp_path), make_trace("x"))
    assert (v.outcome, v.note) == ("inconclusive", "grader script ran over 1s")
