"""BERT's uncased WordPiece tokenizer, in plain Python, for the ``similar`` check's model.

all-MiniLM-L6-v2 reads token ids, not text. The ids come from BERT's
uncased vocabulary by BERT's rules: drop control characters, set CJK
ideographs apart, strip accents and lowercase, split on whitespace and
punctuation, then cut each word into the longest pieces the vocabulary
holds (``##`` marks a piece inside a word). Written here rather than taken
from a tokenizer library because those pull in a model hub client and
a second runtime for some eighty lines of rules (docs/decisions/0034).

Pure and thread-safe: a tokenizer is read-only once built. Input is read
lazily and stops as soon as the token budget is full, and never past its
first ``MAX_CHARS`` characters, so a megabyte of output costs no more than
a page of it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Mapping
from pathlib import Path

#: A word longer than this (in characters) is one unknown token, as in BERT.
MAX_WORD_CHARS = 100
#: How much of a text is ever read: 256 tokens of any ordinary text take a
#: tenth of it; only whitespace or one enormous word could reach past it.
MAX_CHARS = 32_768

# CJK ideograph blocks BERT sets apart as words of their own.
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_cjk(code: int) -> bool:
    return any(low <= code <= high for low, high in _CJK)


_DROPPED = frozenset(("Cc", "Cf", "Co", "Cs"))


def _is_dropped(char: str) -> bool:
    # NUL, the replacement character, controls, format characters, private use
    # and lone surrogates go (an unassigned code point stays, an unknown word);
    # tab and the line breaks are whitespace instead.
    if char in "\t\n\r":
        return False
    return char in "\x00\ufffd" or unicodedata.category(char) in _DROPPED


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    # BERT counts every non-alphanumeric ASCII character as punctuation ($, ^, `).
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _fold(word: str) -> str:
    """Accents stripped (decomposed, combining marks dropped), then lowercased."""
    decomposed = unicodedata.normalize("NFD", word)
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn").lower()


def _split_punctuation(word: str) -> Iterator[str]:
    start = 0
    for index, char in enumerate(word):
        if _is_punctuation(char):
            if start < index:
                yield word[start:index]
            yield char
            start = index + 1
    if start < len(word):
        yield word[start:]


def words(text: str) -> Iterator[str]:
    """The words BERT's normaliser and pre-tokenizer make of ``text``, lazily."""
    run: list[str] = []
    for char in text:
        if _is_dropped(char):
            continue  # dropped, not a break: "a\x00b" is one word
        space = char.isspace()  # Unicode's White_Space, once the controls are gone
        if space or _is_cjk(ord(char)):
            if run:
                yield from _split_punctuation(_fold("".join(run)))
                run.clear()
            if not space:
                yield from _split_punctuation(_fold(char))
        else:
            run.append(char)
    if run:
        yield from _split_punctuation(_fold("".join(run)))


class WordPiece:
    """A vocabulary and the rules that cut text into its ids."""

    def __init__(self, vocab: Mapping[str, int]) -> None:
        self._vocab = dict(vocab)
        try:
            self.cls_id, self.sep_id = self._vocab["[CLS]"], self._vocab["[SEP]"]
            self.unk_id, self.pad_id = self._vocab["[UNK]"], self._vocab["[PAD]"]
        except KeyError as missing:
            raise ValueError(f"the vocabulary has no {missing.args[0]} token") from None

    @classmethod
    def from_file(cls, path: Path) -> WordPiece:
        """A vocabulary file of one token a line, the line number being its id."""
        tokens = path.read_text(encoding="utf-8").splitlines()
        return cls({token: index for index, token in enumerate(tokens) if token})

    def pieces(self, word: str) -> list[int]:
        """The ids of one word's pieces, longest match first; an unknown word is one [UNK]."""
        if len(word) > MAX_WORD_CHARS:
            return [self.unk_id]
        ids: list[int] = []
        start = 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self._vocab.get(piece)
                if found is not None:
                    ids.append(found)
                    start = end
                    break
            else:  # no piece fits: BERT gives up on the whole word
                return [self.unk_id]
        return ids

    def encode(self, text: str, max_tokens: int) -> list[int]:
        """``[CLS]`` + the text's ids + ``[SEP]``, at most ``max_tokens`` in all (the rest cut)."""
        if max_tokens < 2:
            raise ValueError("max_tokens must leave room for [CLS] and [SEP]")
        room = max_tokens - 2
        ids = [self.cls_id]
        for word in words(text[:MAX_CHARS]):
            if len(ids) > room:
                break
            ids.extend(self.pieces(word))
        del ids[room + 1:]
        ids.append(self.sep_id)
        return ids
