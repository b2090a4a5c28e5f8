"""``exec:COMMAND ARGS…`` against real programs: Python and Node scripts, shell one-liners,
programs that fail, refuse, crash, hang, print garbage or far too much (SPEC §15).

Every program here is a real process started by the real target; the hangs
go through a real battery, which stops them at the case's timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import sys
import textwrap
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from assay.engine import Battery, BatteryOptions
from assay.errors import HarnessFailure, UsageError
from assay.model import Case, CaseResult, Event, Evidence, Trace
from assay.suites import load_suite_file
from assay.targets import TargetOptions, TrialBroken, TrialRequest, make_target
from assay.targets.exec import (
    STDERR_KEPT,
    STDOUT_KEPT,
    ExecTarget,
    ExecTrial,
    parse_command,
    read_output,
)

pytestmark = pytest.mark.real

PYTHON = shlex.quote(sys.executable)

#: Reads its input as JSON on stdin and answers with JSON; says on stderr what it got.
ECHO = """\
import json, os, sys
raw = sys.stdin.read()
print("got", raw.strip(), file=sys.stderr)
print(json.dumps({"raw": raw, "input": json.loads(raw), "argv": sys.argv[1:],
                  "cwd": os.getcwd()}))
"""


def write(folder: Path, name: str, text: str, executable: bool = False) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    if executable:
        path.chmod(0o755)
    return path


def request(value: Any = None, *, workspace: Path | None = None, n: int = 1,
            timeout_s: float = 30.0) -> TrialRequest:
    return TrialRequest(case=Case(id="c1", input=value), n=n, timeout_s=timeout_s,
                        workspace=workspace)


def run(uri: str, base: Path, *requests: TrialRequest,
        target: ExecTarget | None = None) -> list[Trace]:
    """Start the target, run the requests one after another, close it."""
    made = target or make_target(uri, TargetOptions(base_dir=base))

    async def go() -> list[Trace]:
        await made.start()
        try:
            return [await made.run(r) for r in requests]
        finally:
            await made.close()

    return asyncio.run(go())


def broken(uri: str, base: Path, value: Any = None) -> str:
    with pytest.raises(TrialBroken) as caught:
        run(uri, base, request(value))
    return str(caught.value)


# --- input and output ------------------------------------------------------------------------

def test_a_python_script_reads_the_input_as_json_on_stdin_and_answers_with_json(
        tmp_path: Path) -> None:
    write(tmp_path, "agent.py", ECHO)
    obj, text = run(f"exec:{PYTHON} agent.py", tmp_path,
                    request({"amount": 100, "into": "USD"}), request("héllo"))
    assert obj.status == "ok" and obj.exit_code == 0 and obj.settled is True
    assert obj.output["input"] == {"amount": 100, "into": "USD"}
    # A string input is JSON too: quoted, one line.
    assert text.output["raw"] == '"héllo"\n' and text.output["input"] == "héllo"
    assert obj.stdout == 'got {"amount": 100, "into": "USD"}\n'
    assert obj.steps is None and obj.events == [] and obj.facets["harness"] == "exec"
    assert obj.evidence_for("output") == obj.evidence_for("exit_code") == Evidence.OBSERVED
    for fact in ("tool_calls", "asks", "tokens", "cost", "steps"):
        assert obj.evidence_for(fact) == Evidence.UNAVAILABLE, fact
    # Without a workspace it runs in an empty folder of its own, never beside the suite.
    assert Path(obj.output["cwd"]).resolve() != tmp_path.resolve()
    assert not Path(obj.output["cwd"]).exists()


def test_input_in_the_arguments_goes_there_and_stdin_is_empty(tmp_path: Path) -> None:
    write(tmp_path, "args.py", """\
        import json, sys
        print(json.dumps({"argv": sys.argv[1:], "stdin": sys.stdin.read()}))
        """)
    uri = f"exec:{PYTHON} args.py --task={{input}} {{input}} plain"
    text, obj, number = run(uri, tmp_path, request("fix it; rm -rf /"),
                            request({"n": [1, 2]}), request(7))
    assert text.output == {"argv": ["--task=fix it; rm -rf /", "fix it; rm -rf /", "plain"],
                           "stdin": ""}
    # Anything but a string is its JSON text.
    assert obj.output["argv"] == ['--task={"n": [1, 2]}', '{"n": [1, 2]}', "plain"]
    assert number.output["argv"][1] == "7"


def test_a_shell_one_liner(tmp_path: Path) -> None:
    (trace,) = run("exec:sh -c 'printf \"%s\" \"$(cat)\"; echo \"seen\" >&2'", tmp_path,
                   request({"n": 3, "say": "hi"}))
    assert trace.output == {"n": 3, "say": "hi"} and trace.stdout == "seen\n"


def test_a_shell_one_liner_with_the_input_as_a_positional_parameter(tmp_path: Path) -> None:
    # "$1", never {input} inside the script: the input is data, not shell code.
    (trace,) = run("exec:sh -c 'echo \"you said: $1\"' sh {input}", tmp_path,
                   request("$(touch pwned) `id`"))
    assert trace.output == "you said: $(touch pwned) `id`"
    assert not (tmp_path / "pwned").exists()


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_a_node_script(tmp_path: Path) -> None:
    write(tmp_path, "agent.js", """\
        let raw = "";
        process.stdin.on("data", (chunk) => { raw += chunk; });
        process.stdin.on("end", () => {
          const input = JSON.parse(raw);
          console.error("node got", input.amount);
          console.log(JSON.stringify({amount: input.amount * 2, currency: "USD",
                                      runtime: "node"}));
        });
        """)
    (trace,) = run("exec:node agent.js", tmp_path, request({"amount": 100}))
    assert trace.status == "ok" and trace.exit_code == 0
    assert trace.output == {"amount": 200, "currency": "USD", "runtime": "node"}
    assert trace.stdout == "node got 100\n"


@pytest.mark.parametrize(("printed", "output"), [
    ('{"a": 1}\n', {"a": 1}),
    ("42\n", 42),
    ('"quoted"\n', "quoted"),
    ("plain words\n", "plain words"),
    ("two\nlines\n\n", "two\nlines\n"),        # one trailing newline dropped, not more
    ("windows\r\n", "windows"),
    ("", None),
    ("NaN\n", "NaN"),                          # not JSON: a store cannot keep it
    ('{"a": 1} trailing\n', '{"a": 1} trailing'),
    ("[" * 100_000, "[" * 100_000),            # too deep to parse: text
])
def test_stdout_is_json_when_the_whole_of_it_parses(printed: str, output: Any) -> None:
    assert read_output(printed) == output


# --- how a program ends ----------------------------------------------------------------------

def test_a_non_zero_exit_is_an_error_with_stderrs_last_line_and_the_output_kept(
        tmp_path: Path) -> None:
    write(tmp_path, "fails.py", """\
        import sys
        print('{"done": "half"}')
        print("working\\nboom: the rate service is down\\n\\n", file=sys.stderr)
        sys.exit(3)
        """)
    write(tmp_path, "quiet.py", "raise SystemExit(2)\n")
    (trace,) = run(f"exec:{PYTHON} fails.py", tmp_path, request("x"))
    assert (trace.status, trace.exit_code, trace.settled) == ("error", 3, False)
    assert trace.error == "exited with code 3: boom: the rate service is down"
    assert trace.output == {"done": "half"}
    (quiet,) = run(f"exec:{PYTHON} quiet.py", tmp_path, request("x"))
    assert (quiet.status, quiet.error, quiet.output) == ("error", "exited with code 2", None)


def test_a_refusal_object_is_refused_whatever_the_exit_code(tmp_path: Path) -> None:
    write(tmp_path, "refuses.py", """\
        import json, sys
        code = json.load(sys.stdin)
        print(json.dumps({"status": "refused", "reason": "I do not convert into crypto"}))
        sys.exit(code)
        """)
    zero, one = run(f"exec:{PYTHON} refuses.py", tmp_path, request(0), request(1))
    for trace, code in ((zero, 0), (one, 1)):
        assert (trace.status, trace.error, trace.exit_code) == (
            "refused", "I do not convert into crypto", code)
        assert trace.settled is True
        assert trace.output == {"status": "refused", "reason": "I do not convert into crypto"}
    # Anything but exactly "refused" is an answer like any other.
    (other,) = run("exec:echo '{\"status\": \"Refused\"}'", tmp_path, request())
    assert other.status == "ok"


def test_a_program_killed_by_a_signal_breaks_the_trial_and_says_which(tmp_path: Path) -> None:
    write(tmp_path, "crash.py", """\
        import os, signal, sys
        print("about to fall over", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
        """)
    said = broken(f"exec:{PYTHON} crash.py", tmp_path, "x")
    assert said == "the agent was killed by SIGSEGV; its stderr ends with: about to fall over"
    assert broken("exec:sh -c 'kill -KILL $$'", tmp_path) == "the agent was killed by SIGKILL"


def test_a_program_that_cannot_be_executed_breaks_the_trial(tmp_path: Path) -> None:
    write(tmp_path, "noshebang.sh", "echo hi\n", executable=True)
    (tmp_path / "noshebang.sh").write_bytes(b"\x7fELF garbage")
    said = broken("exec:./noshebang.sh", tmp_path)
    assert said.startswith("cannot run ") and "noshebang.sh" in said


def test_an_input_no_argument_can_carry_breaks_the_trial_not_the_run(tmp_path: Path) -> None:
    said = broken("exec:echo {input}", tmp_path, "a\x00b")
    assert said.startswith("the program's arguments cannot be passed to it")


# --- hostile output --------------------------------------------------------------------------

def test_bytes_that_are_not_utf8_are_read_as_replacement_characters(tmp_path: Path) -> None:
    write(tmp_path, "garbage.py", """\
        import sys
        sys.stdout.buffer.write(b'\\xff\\xfe{"a": "\\xc3"}\\x00\\n')
        sys.stderr.buffer.write(b"\\xff bad \\xfe\\n")
        """)
    (trace,) = run(f"exec:{PYTHON} garbage.py", tmp_path, request())
    assert trace.status == "ok"
    assert trace.output == '\ufffd\ufffd{"a": "\ufffd"}\x00'
    assert trace.stdout == "\ufffd bad \ufffd\n"
    Trace.model_validate_json(trace.model_dump_json())  # storable as it is


def test_too_much_stdout_is_cut_and_says_so_and_too_much_stderr_keeps_its_tail(
        tmp_path: Path) -> None:
    write(tmp_path, "loud.py", f"""\
        import sys
        sys.stderr.write("FIRST-STDERR-LINE\\n" + "e" * {STDERR_KEPT * 3} + "\\nLAST\\n")
        sys.stdout.write('{{"a": "' + "x" * {STDOUT_KEPT * 2} + '"}}')
        """)
    (trace,) = run(f"exec:{PYTHON} loud.py", tmp_path, request())
    printed = STDOUT_KEPT * 2 + len('{"a": ""}')
    # The program was never blocked on a full pipe: it ran to its end and exited 0.
    assert trace.exit_code == 0 and trace.status == "error" and trace.settled is False
    assert trace.error == (f"the agent printed {printed:,} bytes on stdout; the output is "
                           f"the first {STDOUT_KEPT:,}")
    assert isinstance(trace.output, str) and len(trace.output) == STDOUT_KEPT
    assert trace.output.startswith('{"a": "xxx')
    assert trace.stdout.endswith("e\nLAST\n") and "FIRST-STDERR-LINE" not in trace.stdout
    assert trace.stdout.startswith("<assay: the first ") and "bytes of stderr were dropped>" \
        in trace.stdout.splitlines()[0]
    assert len(trace.stdout) < STDERR_KEPT + 200


# --- the environment -------------------------------------------------------------------------

ENV = """\
import json, os, sys
print(json.dumps({"env": dict(os.environ), "cwd": os.getcwd()}))
"""


def test_the_program_gets_no_provider_key_and_none_of_assays_secrets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ASSAY_DB",
                 "ASSAY_LEDGER_KEY", "ASSAY_HIDDEN_DIR"):
        monkeypatch.setenv(name, f"canary-{name}")
    monkeypatch.setenv("ASSAY_WORKSPACE", "/the/users/own")
    monkeypatch.setenv("KEEP_ME", "yes")
    write(tmp_path, "env.py", ENV)
    first, second = run(f"exec:{PYTHON} env.py", tmp_path, request(), request())
    env = first.output["env"]
    assert not [v for v in env.values() if "canary" in v]
    assert env["KEEP_ME"] == "yes" and env["PATH"] == os.environ["PATH"]
    # A throwaway home, gone with the trial; no workspace, so no ASSAY_WORKSPACE.
    assert env["HOME"] != os.environ.get("HOME") and not Path(env["HOME"]).exists()
    assert "ASSAY_WORKSPACE" not in env
    # The trial's id: opaque, one per trial.
    ids = {first.output["env"]["ASSAY_TRIAL"], second.output["env"]["ASSAY_TRIAL"]}
    assert len(ids) == 2 and all(len(i) == 16 and int(i, 16) >= 0 for i in ids)


def test_with_a_workspace_the_program_runs_in_it_and_is_told_where(tmp_path: Path) -> None:
    write(tmp_path, "env.py", ENV)
    work = tmp_path / "trial-copy"
    work.mkdir()
    (trace,) = run(f"exec:{PYTHON} env.py", tmp_path, request(workspace=work))
    assert trace.output["cwd"] == str(work)
    assert trace.output["env"]["ASSAY_WORKSPACE"] == str(work)


# --- the URI: names beside the suite, the agent version --------------------------------------

def test_relative_names_resolve_beside_the_suite_and_run_from_elsewhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "bin/agent.sh", """\
        #!/bin/sh
        cat "$1"
        """, executable=True)
    write(tmp_path, "data/answer.json", '{"from": "data"}\n')
    monkeypatch.chdir("/")
    (trace,) = run("exec:bin/agent.sh data/answer.json", tmp_path, request())
    assert trace.output == {"from": "data"}
    command = parse_command("exec:bin/agent.sh -v data/answer.json . {input} data/none",
                            tmp_path)
    base = tmp_path.resolve()
    assert command.argv == (str(base / "bin/agent.sh"), "-v", str(base / "data/answer.json"),
                            ".", "{input}", "data/none")
    assert command.takes_input


def test_a_program_that_is_not_there_is_a_harness_failure(tmp_path: Path) -> None:
    write(tmp_path, "not-executable.sh", "echo hi\n")
    for uri, said in (("exec:no-such-program-x1 --flag", "not found on PATH"),
                      ("exec:./missing.sh", "is not an executable file"),
                      ("exec:./not-executable.sh", "is not an executable file")):
        with pytest.raises(HarnessFailure, match=said):
            run(uri, tmp_path, request())


@pytest.mark.parametrize("uri", ["exec:", "exec:   ", "exec:python 'unbalanced"])
def test_a_uri_that_names_no_command_is_a_usage_error(tmp_path: Path, uri: str) -> None:
    with pytest.raises(UsageError, match="target"):
        make_target(uri, TargetOptions(base_dir=tmp_path))


def test_the_agent_version_is_the_uri_and_the_files_it_names(tmp_path: Path) -> None:
    write(tmp_path, "agent.py", ECHO)
    write(tmp_path, "prompt.txt", "be brief\n")

    def identity() -> dict[str, str]:
        target = make_target(f"exec:{PYTHON} agent.py prompt.txt",
                             TargetOptions(base_dir=tmp_path))
        asyncio.run(target.start())
        return target.identity()

    before = identity()
    assert set(before) == {"uri", "file agent.py", "file prompt.txt"}
    assert not any("json.dumps" in value for value in before.values())  # digests, no content
    (tmp_path / "prompt.txt").write_text("be verbose\n")
    after = identity()
    assert after["file agent.py"] == before["file agent.py"]
    assert after["file prompt.txt"] != before["file prompt.txt"]
    # A program beside the suite is part of the agent; one named by an absolute path
    # (above, the interpreter) or found on PATH runs it, and is not.
    write(tmp_path, "bin/run.sh", "#!/bin/sh\necho hi\n", executable=True)
    script = make_target("exec:bin/run.sh", TargetOptions(base_dir=tmp_path))
    asyncio.run(script.start())
    assert set(script.identity()) == {"uri", "file bin/run.sh"}


# --- concurrency -----------------------------------------------------------------------------

def test_sixteen_trials_at_once_each_in_a_folder_of_its_own(tmp_path: Path) -> None:
    write(tmp_path, "mark.py", """\
        import json, os, sys
        from pathlib import Path
        n = json.load(sys.stdin)
        others = sorted(os.listdir("."))
        Path("mine.txt").write_text(str(n))
        print(json.dumps({"n": n, "cwd": os.getcwd(), "found": others,
                          "home": os.environ["HOME"], "trial": os.environ["ASSAY_TRIAL"]}))
        """)
    target = make_target(f"exec:{PYTHON} mark.py", TargetOptions(base_dir=tmp_path,
                                                                   concurrency=16))

    async def go() -> list[Trace]:
        await target.start()
        try:
            return list(await asyncio.gather(*(target.run(request(n, n=n))
                                               for n in range(16))))
        finally:
            await target.close()

    traces = asyncio.run(go())
    assert [t.output["n"] for t in traces] == list(range(16))
    assert all(t.output["found"] == [] for t in traces)  # nobody else's mine.txt
    for key in ("cwd", "home", "trial"):
        assert len({t.output[key] for t in traces}) == 16, key
    assert not any(Path(t.output["cwd"]).exists() for t in traces)


# --- timeouts: the battery stops the trial, and the whole process group dies ----------------

def _dead(pid: int) -> bool:
    """Gone, or a zombie nobody has reaped yet (it runs no more)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _all_dead(pids: list[int], within_s: float = 5.0) -> bool:
    # A signal is delivered asynchronously by the kernel: the group was killed before
    # the battery returned, and a killed process may still need a moment to be gone.
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if all(_dead(pid) for pid in pids):
            return True
        time.sleep(0.01)
    return all(_dead(pid) for pid in pids)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_hang_is_stopped_at_the_cases_timeout_and_its_whole_group_dies(
        tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    # The agent starts a child that ignores SIGTERM and one that does not, then hangs.
    write(tmp_path, "hang.py", f"""\
        import os, signal, subprocess, sys, time
        from pathlib import Path
        child = subprocess.Popen([sys.executable, "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "time.sleep(600)"])
        sleeper = subprocess.Popen(["sleep", "600"])
        Path({str(pids)!r}, "pids").write_text(f"{{os.getpid()}} {{child.pid}} {{sleeper.pid}}")
        print("started", file=sys.stderr, flush=True)
        time.sleep(600)
        """)
    suite = write(tmp_path, "hang.suite.yaml", f"""\
        suite: exec/hang@1
        target: exec:{PYTHON} hang.py
        cases:
          - id: hangs
            input: x
            timeout_s: 1.5
            expect: [{{status: ok}}]
        """)
    began = time.monotonic()
    report = asyncio.run(Battery(load_suite_file(suite),
                                 make_target(f"exec:{PYTHON} hang.py",
                                             TargetOptions(base_dir=tmp_path)),
                                 BatteryOptions()).run())
    took = time.monotonic() - began
    (case,) = report.cases
    assert isinstance(case, CaseResult)
    (trial,) = case.trials
    assert (case.outcome, trial.outcome) == ("broken", "broken")
    assert trial.reason == "timed out after 1.5s before any output"
    found = [int(p) for p in (pids / "pids").read_text().split()]
    assert len(found) == 3
    assert _all_dead(found), [p for p in found if not _dead(p)]
    # The agent dies of the TERM at once; what ignored it is killed then, not waited for.
    assert took < 1.5 + 2


# --- the seam for observers (the recording proxy, the OTLP receiver) -------------------------

class _Route:
    """A watch as the recording proxy will be one: a route per trial, facts added after."""

    def __init__(self, trial: ExecTrial, log: list[str]) -> None:
        self.trial, self.log = trial, log
        self.env = {"OPENAI_BASE_URL": f"http://127.0.0.1:9/t/{trial.id}/v1",
                    "OPENAI_API_KEY": "stand-in", "ASSAY_TRIAL": "not-yours"}

    def seen(self, trace: Trace) -> Trace:
        self.log.append(f"seen {trace.status}")
        return trace.model_copy(update={
            "events": [*trace.events, Event(kind="tool_call", name="rates.lookup")],
            "evidence": {**trace.evidence, "tool_calls": Evidence.OBSERVED}})

    def end(self) -> None:
        self.log.append("end")


class _Proxy:
    evidence: Mapping[str, Evidence] = {"tool_calls": Evidence.OBSERVED}

    def __init__(self) -> None:
        self.log: list[str] = []
        self.trials: list[ExecTrial] = []

    async def start(self) -> None:
        self.log.append("start")

    def watch(self, trial: ExecTrial) -> _Route:
        self.trials.append(trial)
        self.log.append("watch")
        return _Route(trial, self.log)

    async def close(self) -> None:
        self.log.append("close")


def test_an_observer_adds_variables_per_trial_and_facts_to_its_trace(
        tmp_path: Path) -> None:
    write(tmp_path, "env.py", ENV)
    proxy = _Proxy()
    target = ExecTarget(f"exec:{PYTHON} env.py", TargetOptions(base_dir=tmp_path), [proxy])
    assert target.evidence["tool_calls"] == Evidence.OBSERVED
    (trace,) = run("", tmp_path, request(), target=target)
    env = trace.output["env"]
    (trial,) = proxy.trials
    assert env["OPENAI_BASE_URL"] == f"http://127.0.0.1:9/t/{trial.id}/v1"
    assert env["OPENAI_API_KEY"] == "stand-in"  # the observer's, not the user's
    assert env["ASSAY_TRIAL"] == trial.id  # assay's own variables are not overridden
    assert trial.workdir == Path(trace.output["cwd"]) and trial.home == Path(env["HOME"])
    assert [e.name for e in trace.events] == ["rates.lookup"]
    assert proxy.log == ["start", "watch", "seen ok", "end", "close"]


def test_an_observer_sees_the_trace_so_far_of_a_trial_stopped_at_its_timeout(
        tmp_path: Path) -> None:
    proxy = _Proxy()
    target = ExecTarget("exec:sleep 600", TargetOptions(base_dir=tmp_path), [proxy])
    given = request("x", timeout_s=0.5)

    async def go() -> None:
        await target.start()
        try:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(given.timeout_s):
                    await target.run(given)
        finally:
            await target.close()

    asyncio.run(go())
    cut = given.partial.trace()
    assert cut is not None and cut.status == "timeout"
    assert [e.name for e in cut.events] == ["rates.lookup"]
    assert proxy.log == ["start", "watch", "seen timeout", "end", "close"]


def test_the_run_is_told_about_its_input_as_data(tmp_path: Path) -> None:
    # json.dumps of the input and what the program parses agree, for any JSON value.
    write(tmp_path, "agent.py", ECHO)
    values = [None, True, 0, -1.5, "", "line\nbreak", ["a", {"b": None}], {"ü": "\u2603"}]
    traces = run(f"exec:{PYTHON} agent.py", tmp_path, *(request(v) for v in values))
    assert [t.output["input"] for t in traces] == values
    assert all(json.loads(t.output["raw"]) == v for t, v in zip(traces, values, strict=True))
