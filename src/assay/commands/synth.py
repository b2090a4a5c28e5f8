"""`assay synth SUITE --model openai:MODEL --n K`: cases drafted by a model (SPEC §10)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import AssayError, HarnessFailure, UsageError
from .common import fail
from .draft_files import write_draft

if TYPE_CHECKING:
    from ..drafting.synth import Checked, SynthPrompt
    from ..judging.opinion import Opinion
    from ..suites import LoadedSuite

#: How long the model may take to answer: K drafts are a long answer.
TIMEOUT_S = 300.0
#: The answer's token cap, per draft asked (plus one draft's worth for the wrapping).
TOKENS_PER_DRAFT = 1024
#: Where suites are looked for when SUITE is a suite id, as ``assay run`` looks.
DEFAULT_ROOT = Path("evals")


@click.command()
@click.argument("suite_name", metavar="SUITE")
@click.option("--model", "model_uri", metavar="URI",
              help="The model that drafts, openai:MODEL behind an OpenAI-compatible server "
                   "(required).")
@click.option("--n", "k", type=click.IntRange(min=1), metavar="K",
              help="How many cases to ask for (required).")
@click.option("--base-url", metavar="URL",
              help="The model's OpenAI-compatible server, such as http://127.0.0.1:11434/v1 "
                   "(default: $ASSAY_OPENAI_BASE_URL).")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Where the drafts go (default: NAME.synth.yaml beside the suite file).")
@click.option("--force", is_flag=True, help="Replace FILE when it exists already.")
@click.option("--seed", type=click.IntRange(min=0, max=2**31 - 1), metavar="S",
              help="Seed sent to the model and used to pick the examples a large suite shows "
                   "(default: a fresh one, recorded in the file).")
def synth(suite_name: str, model_uri: str | None, k: int | None, base_url: str | None,
          out: Path | None, force: bool, seed: int | None) -> None:
    """Ask a model to draft new cases like a suite's public ones.

    SUITE is a suite file, or a suite id found under evals/. The model sees
    the suite's public cases only, never a hidden one, and answers in JSON.
    Each draft is built as the suite loader builds a case: one that is not a
    valid case is refused and named, the others are written, each marked
    synthetic: true, to a suite file of their own (ns/name-synth@N) whose
    header records the model, the prompt's digest and the seed. Exit 2 when
    the answer holds no valid draft (nothing is written), 3 when the model's
    server cannot be asked.
    """
    from ..drafting.synth import BadAnswer, check_drafts, public_tools, synth_prompt

    try:
        model, url = _model(model_uri, base_url)
        if k is None:
            raise UsageError("--n K is required: how many cases to draft")
        loaded = _suite(suite_name)
        target = out or default_out(loaded.path)
        if target.exists() and not force:
            raise UsageError(f"{target} exists already: give --force to replace it, or --out "
                             "another file")
        if seed is None:
            import secrets

            seed = secrets.randbelow(2**31)
        fixtures, tools = public_tools(loaded)
        prompt = synth_prompt(loaded.suite, k, seed, tools=tools, fixtures=fixtures)
        opinion = asyncio.run(_ask(model, url, prompt, seed, k))
        raw = _answer(opinion, model)
        try:
            from ..drafting.synth import read_answer

            items = read_answer(raw)
        except BadAnswer as error:
            raise UsageError(f"synth: {error}; nothing written") from None
        public = [case.id for case in loaded.suite.cases if case.split == "public"]
        checked = check_drafts(items, k, target.parent, public)
        _say_refused(checked)
        if not checked.valid:
            raise UsageError(f"synth: none of the {min(len(items), k)} draft(s) is a valid case; "
                             "nothing written")
        text = _document(loaded, model, opinion, prompt, seed, k, len(items), checked)
        write_draft(target, text, force=force)
    except AssayError as error:
        fail(error)
        return
    click.echo(f"synth: wrote {len(checked.valid)} of {k} draft(s) to {target} "
               f"(seed {seed}; prompt {prompt.digest})", err=True)


def default_out(suite_file: Path) -> Path:
    """``NAME.synth.yaml`` beside the suite file, NAME its name without ``.suite.yaml``.

    Not ``*.suite.yaml``: discovery does not pick drafts up, so nothing runs
    them before a person has read them (``assay run FILE`` runs them on purpose).
    """
    name = suite_file.name
    for ending in (".suite.yaml", ".suite.yml", "_eval.py", ".yaml", ".yml", ".py"):
        if name.endswith(ending) and len(name) > len(ending):
            name = name[: -len(ending)]
            break
    return suite_file.with_name(f"{name}.synth.yaml")


def _model(model_uri: str | None, base_url: str | None) -> tuple[str, str]:
    from ..targets.openai import BASE_URL_ENV, check_base_url

    if not model_uri:
        raise UsageError("--model is required: openai:MODEL, the model that drafts the cases")
    scheme, colon, model = model_uri.partition(":")
    if scheme != "openai" or not colon or not model:
        raise UsageError(f"--model {model_uri!r}: synth asks a model behind an "
                         "OpenAI-compatible server, written openai:MODEL")
    url = base_url or os.environ.get(BASE_URL_ENV)
    if not url:
        raise UsageError(f"no server for {model_uri}: give --base-url URL or set {BASE_URL_ENV} "
                         "(e.g. http://127.0.0.1:11434/v1 for Ollama)")
    check_base_url(url)
    return model, url


def _suite(name: str) -> LoadedSuite:
    """SUITE as a suite file, else as a suite id under ``evals/``."""
    from ..model.suite import SUITE_ID
    from ..suites import discover, load_suite_file

    path = Path(name)
    if path.is_file():
        return load_suite_file(path)
    if not SUITE_ID.match(name):
        raise UsageError(f"{name}: no such suite file (SUITE is a suite file or a suite id "
                         "such as demo/support.agent@1)")
    if not DEFAULT_ROOT.is_dir():
        raise UsageError(f"no suite {name}: there is no {DEFAULT_ROOT}/ folder here to find it "
                         "in; give the suite file instead")
    for loaded in discover([DEFAULT_ROOT]):
        if loaded.suite.id == name:
            return loaded
    raise UsageError(f"no suite {name} under {DEFAULT_ROOT}/")


async def _ask(model: str, url: str, prompt: SynthPrompt, seed: int, k: int) -> Opinion:
    from ..judging.client import JudgeSettings, ask, make_client

    settings = JudgeSettings(model=model, base_url=url, timeout_s=TIMEOUT_S, temperature=None,
                             seed=seed, max_tokens=TOKENS_PER_DRAFT * (k + 1))
    client = make_client(settings)
    try:
        return await ask(client, settings, prompt.text, prompt_digest=prompt.digest)
    finally:
        await client.close()


def _answer(opinion: Opinion, model: str) -> str:
    """The answer's text; a server that could not be asked is the harness's failure (exit 3)."""
    from ..judging.answers import REFUSED

    if opinion.error == REFUSED:
        raise UsageError(f"synth: the model openai:{model} refused to draft cases; nothing "
                         "written")
    if opinion.error == "no text in the answer":
        raise UsageError(f"synth: the model openai:{model} answered with no text; nothing "
                         "written")
    if opinion.error is not None or opinion.raw is None:
        raise HarnessFailure(f"synth: could not ask openai:{model}: "
                             f"{opinion.error or 'no answer'}")
    return opinion.raw


def _say_refused(checked: Checked) -> None:
    from ..reports.safe import inert

    for number, why in checked.refused:
        click.echo(inert(f"synth: draft {number} refused: {why}", one_line=True), err=True)
    if checked.extra:
        click.echo(f"synth: the model gave {checked.extra} draft(s) more than asked; they "
                   "were not read", err=True)


def _document(loaded: LoadedSuite, model: str, opinion: Opinion, prompt: SynthPrompt,
              seed: int, k: int, given: int, checked: Checked) -> str:
    import json

    from ..drafting.synth import synth_suite, synth_text

    answered = f" (answered as {opinion.model})" if opinion.model != model else ""
    parameters: dict[str, Any] = dict(opinion.parameters)
    refused = "; ".join(f"draft {n}: {why}" for n, why in checked.refused)
    notes = [
        "SYNTHETIC cases drafted by `assay synth`: a model wrote them. Read each before it "
        "counts;",
        "each is marked synthetic: true, so a run reports it apart from observed cases.",
        f"source suite: {loaded.suite.id} ({loaded.path}); the prompt showed "
        f"{prompt.shown} of its {prompt.public} public case(s) and no hidden case.",
        f"model: openai:{model}{answered}",
        f"prompt: {prompt.digest}",
        f"seed: {seed}",
        f"parameters: {json.dumps(parameters, sort_keys=True)}",
        f"drafts: {k} asked, {given} given, {len(checked.valid)} written, "
        f"{len(checked.refused)} refused" + (f" ({refused})" if refused else ""),
        "Paste the cases under the suite's cases: to run them beside its observed ones, or",
        "run this file on its own (`assay run FILE`): it scores them apart and never passes,",
        "since synthetic cases alone are not evidence (flag no-observed-cases).",
    ]
    return synth_text(notes, synth_suite(loaded), [draft for _, draft in checked.valid])
