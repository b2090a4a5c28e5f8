"""BERT's uncased WordPiece rules, on the vocabulary the similar check's model reads.

The expected ids are those the reference tokenizer (Hugging Face's, loaded
from the model's own tokenizer.json) gives for the same text; see
docs/decisions/0034 for how the two were compared at large.
"""

from __future__ import annotations

import hashlib
from importlib import resources

import pytest

from assay.judging.wordpiece import MAX_CHARS, WordPiece, words

from ..fuzz_corpus import HOSTILE, MEGABYTE

CLS, SEP, UNK = 101, 102, 100
#: Where assay ships the vocabulary (``similarity.VOCAB_FILE``).
VOCAB_FILE = "data/all-MiniLM-L6-v2.vocab.txt"


@pytest.fixture(scope="module")
def tokenizer() -> WordPiece:
    text = resources.files("assay.judging").joinpath(VOCAB_FILE).read_text(encoding="utf-8")
    return WordPiece({token: index for index, token in enumerate(text.splitlines()) if token})


def test_the_shipped_vocabulary_is_bert_uncased() -> None:
    body = resources.files("assay.judging").joinpath(VOCAB_FILE).read_bytes()
    # The vocab.txt that all-MiniLM-L6-v2 is published with, byte for byte.
    assert hashlib.sha256(body).hexdigest() == (
        "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3")
    assert len(body.decode("utf-8").splitlines()) == 30522


@pytest.mark.parametrize(("text", "ids"), [
    ("unaffable", [14477, 20961, 3468]),                      # una ##ffa ##ble
    ("Café, naïve!", [7668, 1010, 15743, 999]),               # accents go, case folds
    ("Hello 日本 world", [7592, 1864, 1876, 2088]),            # each ideograph a word
    ("a\x00b", [11113]),                                      # a dropped control joins
    ("x" * 101, [UNK]),                                       # too long to piece
    ("$5^`", [1002, 1019, 1034, 1036]),                       # ASCII symbols split
    ("tab\tand\u2028line", [21628, 1998, 2240]),              # Unicode whitespace splits
    ("İstanbul", [9960]),
    ("", []),
])
def test_ids_match_the_reference_tokenizer(tokenizer: WordPiece, text: str,
                                           ids: list[int]) -> None:
    assert tokenizer.encode(text, 256) == [CLS, *ids, SEP]


def test_special_tokens_written_in_the_text_are_only_text(tokenizer: WordPiece) -> None:
    # An answer that says "[SEP]" does not end its own sequence early.
    assert tokenizer.encode("[CLS] [SEP]", 256).count(SEP) == 1
    assert tokenizer.encode("[CLS]", 256) == [CLS, 1031, 18856, 2015, 1033, SEP]


def test_a_long_text_is_cut_to_the_budget_and_still_closed(tokenizer: WordPiece) -> None:
    ids = tokenizer.encode("word " * 1000, 16)
    assert len(ids) == 16 and ids[0] == CLS and ids[-1] == SEP
    with pytest.raises(ValueError, match="room"):
        tokenizer.encode("x", 1)


def test_hostile_text_is_read_within_bounds(tokenizer: WordPiece) -> None:
    for text in (HOSTILE, MEGABYTE, " " * (MAX_CHARS * 4), "\ud800" * 10):
        ids = tokenizer.encode(text, 256)
        assert ids[0] == CLS and ids[-1] == SEP and len(ids) <= 256
    assert list(words("lone\ud800high")) == ["lonehigh"]


def test_a_vocabulary_without_its_special_tokens_is_refused() -> None:
    with pytest.raises(ValueError, match=r"\[CLS\]"):
        WordPiece({"a": 0})
