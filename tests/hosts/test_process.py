"""The pieces the host targets share, without a CLI: environment, homes, flags, prompts."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from assay.errors import UsageError
from assay.targets import TargetOptions, TrialBroken, make_target
from assay.targets.hosts.base import prompt_of, without
from assay.targets.hosts.codex_stream import inner_command
from assay.targets.hosts.process import (
    child_environment,
    copy_private,
    is_provider_key,
    run_cli,
    stage_workdir,
)


@pytest.mark.parametrize("name", ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_API_KEY",
                                  "ANTHROPIC_AUTH_TOKEN", "AZURE_OPENAI_API_KEY",
                                  "openai_api_key", "OPENAI_ADMIN_KEY",
                                  "AWS_BEARER_TOKEN_BEDROCK"])
def test_provider_keys_are_known_by_name(name: str) -> None:
    assert is_provider_key(name)


@pytest.mark.parametrize("name", ["ANTHROPIC_BASE_URL", "PATH", "HOME", "KEYBOARD",
                                  "CLAUDE_CODE_OAUTH_TOKEN", "API_KEY_HELPER_PATH"])
def test_other_variables_are_not_provider_keys(name: str) -> None:
    assert not is_provider_key(name)


def test_the_child_environment_drops_keys_and_config_pointers_and_sets_home(
        tmp_path: Path) -> None:
    parent = {"OPENAI_API_KEY": "secret", "ANTHROPIC_API_KEY": "secret", "PATH": "/bin",
              "CODEX_HOME": "/home/u/.codex", "CLAUDE_CONFIG_DIR": "/home/u/.claude",
              "XDG_CONFIG_HOME": "/home/u/.config", "HOME": "/home/u", "LANG": "C.UTF-8"}
    env = child_environment(parent, tmp_path, {"CODEX_HOME": str(tmp_path / ".codex")})
    assert env == {"PATH": "/bin", "LANG": "C.UTF-8", "HOME": str(tmp_path),
                   "CODEX_HOME": str(tmp_path / ".codex")}
    assert "secret" not in env.values()


def test_a_credentials_file_is_copied_private_and_a_missing_one_is_not_an_error(
        tmp_path: Path) -> None:
    source = tmp_path / "auth.json"
    source.write_bytes(b'{"token": "x"}')
    assert copy_private(source, tmp_path / "home" / ".codex" / "auth.json")
    copied = tmp_path / "home" / ".codex" / "auth.json"
    assert copied.read_bytes() == source.read_bytes()
    assert stat.S_IMODE(copied.stat().st_mode) == 0o600
    assert not copy_private(tmp_path / "absent.json", tmp_path / "home" / "x.json")


def test_the_working_folder_is_a_copy_of_a_fixture_folder_or_holds_a_fixture_file(
        tmp_path: Path) -> None:
    folder = tmp_path / "fixture"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.txt").write_text("a")
    home = tmp_path / "h1"
    home.mkdir()
    work = stage_workdir(home, folder)
    assert (work / "sub" / "a.txt").read_text() == "a" and work != folder
    home2 = tmp_path / "h2"
    home2.mkdir()
    assert [p.name for p in stage_workdir(home2, folder / "sub" / "a.txt").iterdir()] == [
        "a.txt"]
    home3 = tmp_path / "h3"
    home3.mkdir()
    assert list(stage_workdir(home3, None).iterdir()) == []


def test_a_prompt_is_a_string_or_a_mapping_with_only_a_prompt() -> None:
    assert prompt_of("hi") == "hi"
    assert prompt_of({"prompt": "hi"}) == "hi"
    for bad in ({"prompt": "hi", "files": []}, {"text": "hi"}, ["hi"], 3, None):
        with pytest.raises(TrialBroken):
            prompt_of(bad)


def test_a_case_pin_replaces_the_uris_flag() -> None:
    args = ["-m", "a", "--model=b", "-c", "x=1", "--model", "c"]
    assert without(args, "-m", "--model") == ["-c", "x=1"]


@pytest.mark.parametrize(("command", "inner"), [
    ("/bin/bash -lc 'cat notes.txt'", "cat notes.txt"),
    ("/bin/zsh -c 'echo \"a b\" > x'", 'echo "a b" > x'),
    ("python3 -c 'print(1)'", "python3 -c 'print(1)'"),
    ("ls -la", "ls -la"),
    ("bash -lc 'unterminated", "bash -lc 'unterminated"),
])
def test_the_inner_command_of_a_shell_wrapper(command: str, inner: str) -> None:
    assert inner_command(command) == inner


def test_relative_paths_after_path_flags_name_files_beside_the_suite(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text("{}")
    target = make_target("claude --mcp-config mcp.json --model mcp.json",
                         TargetOptions(base_dir=tmp_path))
    assert target.args == ["--mcp-config", str(tmp_path / "mcp.json"),  # type: ignore[attr-defined]
                           "--model", "mcp.json"]
    assert target.facets["model"] == "mcp.json"
    with pytest.raises(UsageError, match="unbalanced|quotation"):
        make_target("claude --append-system-prompt 'oops", TargetOptions(base_dir=tmp_path))


def test_a_cancelled_run_kills_its_process_group() -> None:
    async def go() -> None:
        task = asyncio.ensure_future(run_cli(
            [sys.executable, "-c", "import subprocess, sys, time; "
             "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
             "print('started', flush=True); time.sleep(60)"],
            cwd=Path.cwd(), env={**os.environ, "ASSAY_TEST_MARKER": marker}))
        await asyncio.sleep(1.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    marker = f"process-test-{os.getpid()}"
    asyncio.run(go())
    alive = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if f"ASSAY_TEST_MARKER={marker}".encode() in (proc / "environ").read_bytes():
                    alive.append(proc.name)
            except OSError:
                continue
    assert alive == []


def test_a_grandchild_holding_stdout_does_not_hold_the_run() -> None:
    async def go() -> float:
        done = await run_cli(
            [sys.executable, "-c", "import subprocess, sys; "
             "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
             "print('{\"type\": \"done\"}')"],
            cwd=Path.cwd(), env=dict(os.environ))
        assert done.exit_code == 0 and done.lines[0][1] == '{"type": "done"}'
        return done.duration_s

    assert asyncio.run(go()) < 10


def test_a_child_that_ignores_sigterm_dies_with_its_group_when_the_cli_exits() -> None:
    async def go() -> int:
        done = await run_cli(
            [sys.executable, "-c", "import subprocess, sys; "
             "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
             "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); "
             "time.sleep(60)'], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL); "
             "child.stdout.readline(); print(child.pid)"],
            cwd=Path.cwd(), env=dict(os.environ))
        return int(done.lines[0][1])

    pid = asyncio.run(go())
    # SIGKILL is delivered by the kernel after killpg returns: a moment may pass.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not _dead(pid):
        time.sleep(0.01)
    assert _dead(pid)


def _dead(pid: int) -> bool:
    """Gone, or a zombie nobody reaped (it runs no more)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")
