"""The call cache's logs on disk: what is written, what is read back, what is skipped.

Entries are counted by reading the ``*.log`` lines on disk, not by asking a
``CallCache``; two ``CallCache`` objects over one folder stand for two processes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from assay.targets import call_cache
from assay.targets.call_cache import ENV_FOLDER, CallCache, cache_root


def lines(folder: Path) -> list[tuple[str, bytes]]:
    """Every complete line of every segment, as (key, raw value), segments by name."""
    found = []
    for path in sorted(folder.glob("*.log")):
        data = path.read_bytes()
        for line in data.split(b"\n")[:-1]:  # past the last newline: cut short
            found.append((line[:64].decode("ascii"), line[65:]))
    return found


def segments(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.log"))


def open_in(folder: Path) -> list[str]:
    """The files under ``folder`` this process holds open (Linux: /proc/self/fd)."""
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(f"{folder}{os.sep}"):
            found.append(target)
    return found


K1, K2, K3 = (CallCache.key(["case", n]) for n in (1, 2, 3))


def test_a_value_comes_back_from_a_fresh_cache(tmp_path: Path) -> None:
    cache = CallCache("judge", tmp_path)
    assert cache.get(K1) is None
    cache.put(K1, {"verdict": "pass", "n": [1, 2.5, None, True]})
    assert cache.writes == 1
    assert cache.get(K1) == {"verdict": "pass", "n": [1, 2.5, None, True]}  # this object
    cache.close()

    again = CallCache("judge", tmp_path)
    assert again.get(K1) == {"verdict": "pass", "n": [1, 2.5, None, True]}  # another
    assert again.get(K2) is None
    assert (again.hits, again.misses) == (1, 1)
    # One segment, one line: the key, a space, compact JSON.
    [segment] = segments(tmp_path / "judge")
    assert segment.read_bytes() == \
        f'{K1} {{"verdict":"pass","n":[1,2.5,null,true]}}\n'.encode()
    # Nothing of the earlier layout is written.
    assert [p.name for p in (tmp_path / "judge").iterdir()] == [segment.name]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd")
def test_close_lets_go_of_every_file(tmp_path: Path) -> None:
    writer = CallCache("judge", tmp_path)
    writer.put(K1, {"v": 1})
    writer.put_later(K2, {"v": 2})
    writer.flush()
    other = CallCache("judge", tmp_path)
    other.put(K3, {"v": 3})
    assert writer.get(K1) == {"v": 1} and writer.get(K3) == {"v": 3}  # two segments read
    assert len(open_in(tmp_path)) == 4  # two written, two read
    writer.close()
    other.close()
    assert open_in(tmp_path) == []


def test_a_put_before_the_first_get_and_one_after_are_both_found(tmp_path: Path) -> None:
    cache = CallCache("agent", tmp_path)
    cache.put(K1, {"a": 1})
    assert cache.get(K1) == {"a": 1}  # the index is built after the put: read from disk
    cache.put(K2, {"b": 2})
    assert cache.get(K2) == {"b": 2}  # added to the index as it was written
    cache.close()
    cache.put(K3, {"c": 3})  # after close: a segment of its own
    assert cache.get(K3) == {"c": 3}
    assert cache.get(K1) == {"a": 1}  # the readers closed are opened again
    cache.close()
    assert len(segments(tmp_path / "agent")) == 2


def test_two_writers_keep_segments_of_their_own_and_a_third_reads_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two writers of one pid that start in the same microsecond still get two segments.
    monkeypatch.setattr(call_cache.time, "time_ns", lambda: 1_764_633_600_123_456_789)
    one, two = CallCache("judge", tmp_path), CallCache("judge", tmp_path)
    one.put(K1, {"by": "one"})
    two.put(K2, {"by": "two"})
    one.put(K3, {"by": "one again"})
    one.close()
    two.close()
    found = segments(tmp_path / "judge")
    assert len(found) == 2
    assert {len(p.read_bytes().splitlines()) for p in found} == {1, 2}  # never interleaved
    assert all(p.name.startswith("20251202T000000.123456Z-") for p in found)  # UTC time
    assert {p.stem.split("-")[1] for p in found} == {str(os.getpid())}

    third = CallCache("judge", tmp_path)
    assert third.get(K1) == {"by": "one"}
    assert third.get(K2) == {"by": "two"}
    assert third.get(K3) == {"by": "one again"}


def test_the_later_of_two_lines_for_a_key_wins(tmp_path: Path) -> None:
    cache = CallCache("judge", tmp_path)
    cache.put(K1, {"v": "first"})
    cache.put(K1, {"v": "second"})
    assert cache.get(K1) == {"v": "second"}
    cache.close()
    assert [k for k, _ in lines(tmp_path / "judge")] == [K1, K1]  # both lines are there
    assert CallCache("judge", tmp_path).get(K1) == {"v": "second"}

    # A later segment (a later process) wins over an earlier one too.
    later = CallCache("judge", tmp_path)
    later.put(K1, {"v": "third"})
    later.close()
    assert CallCache("judge", tmp_path).get(K1) == {"v": "third"}


def test_a_line_cut_short_is_skipped(tmp_path: Path) -> None:
    cache = CallCache("judge", tmp_path)
    cache.put(K1, {"v": 1})
    cache.close()
    [segment] = segments(tmp_path / "judge")
    with segment.open("ab") as fh:  # a process killed mid-write: no newline
        fh.write(f'{K2} {{"v":2}}'.encode())
    reader = CallCache("judge", tmp_path)
    assert reader.get(K1) == {"v": 1}
    assert reader.get(K2) is None
    # A line cut inside its JSON, then more lines after it (not ours: a broken writer's).
    with segment.open("ab") as fh:
        fh.write(f'\n{K3} {{"v":\n'.encode())
    reader = CallCache("judge", tmp_path)
    assert reader.get(K2) == {"v": 2}  # completed by the newline
    assert reader.get(K3) is None
    assert reader.get(K1) == {"v": 1}


@pytest.mark.parametrize("line", [
    b"not a line at all\n",
    b"\n",
    b"ABCDEF" + b"0" * 58 + b' {"v":1}\n',  # upper case hex
    b"0" * 63 + b' {"v":1}\n',  # a digit short
    b"0" * 64 + b'\t{"v":1}\n',  # not a space
    b"0" * 64 + b" \n",  # no value
])
def test_a_line_that_does_not_start_with_a_key_is_skipped(tmp_path: Path,
                                                           line: bytes) -> None:
    folder = tmp_path / "judge"
    folder.mkdir()
    (folder / "20200101T000000.000000Z-1-00000000.log").write_bytes(
        line + f'{K1} {{"v":1}}\n'.encode())
    cache = CallCache("judge", tmp_path)
    assert cache.get(K1) == {"v": 1}
    assert cache.get("0" * 64) is None
    assert cache.get("abcdef" + "0" * 58) is None


@pytest.mark.parametrize("value", [b"[1, 2]", b'"text"', b"null", b"{not json", b"\xff\xfe",
                                   b"{" * 100_000])
def test_a_value_that_is_not_an_object_is_a_miss(tmp_path: Path, value: bytes) -> None:
    folder = tmp_path / "judge"
    folder.mkdir()
    (folder / "20200101T000000.000000Z-1-00000000.log").write_bytes(
        f"{K1} ".encode() + value + b"\n" + f'{K2} {{"v":2}}\n'.encode())
    cache = CallCache("judge", tmp_path)
    assert cache.get(K1) is None
    assert cache.get(K2) == {"v": 2}  # the next line is read all the same
    assert (cache.hits, cache.misses) == (1, 1)


def test_unusual_text_survives_the_round_trip(tmp_path: Path) -> None:
    text = "line\u2028separator\u2029para\x85nel \U0001f600 \ud800 lone\nnewline\r\x00"
    cache = CallCache("judge", tmp_path)
    cache.put(K1, {"said": text, text: 1})
    cache.put(K2, {"after": True})
    cache.close()
    # One line per entry: JSON escapes the newline; U+2028 and the rest are kept raw.
    found = lines(tmp_path / "judge")
    assert [k for k, _ in found] == [K1, K2]
    assert "\u2028".encode() in found[0][1] and "\U0001f600".encode() in found[0][1]
    fresh = CallCache("judge", tmp_path)
    assert fresh.get(K1) == {"said": text, text: 1}
    assert fresh.get(K2) == {"after": True}


def test_the_earlier_layout_is_still_served_and_never_written(tmp_path: Path) -> None:
    folder = tmp_path / "judge"
    (folder / K1[:2]).mkdir(parents=True)
    (folder / K1[:2] / f"{K1}.json").write_text(
        json.dumps({"key": K1, "value": {"old": True}}), encoding="utf-8")
    (folder / K2[:2]).mkdir(parents=True, exist_ok=True)
    (folder / K2[:2] / f"{K2}.json").write_text(  # another key behind the name
        json.dumps({"key": K3, "value": {"old": True}}), encoding="utf-8")
    cache = CallCache("judge", tmp_path)
    assert cache.get(K1) == {"old": True}
    assert cache.get(K2) is None
    cache.put(K1, {"old": False})  # a newer answer goes to the log, and wins
    cache.close()
    assert json.loads((folder / K1[:2] / f"{K1}.json").read_text())["value"] == {"old": True}
    assert CallCache("judge", tmp_path).get(K1) == {"old": False}
    assert [k for k, _ in lines(folder)] == [K1]


def test_put_later_then_flush_is_on_disk_for_a_fresh_cache(tmp_path: Path) -> None:
    cache = CallCache("judge", tmp_path)
    keys = [CallCache.key(["many", n]) for n in range(200)]
    assert cache.get(keys[0]) is None  # the index is built while the writer writes
    for n, key in enumerate(keys):
        cache.put_later(key, {"n": n})
    cache.flush()
    assert cache.writes == 200
    assert [k for k, _ in lines(tmp_path / "judge")] == keys
    assert all(cache.get(key) == {"n": n} for n, key in enumerate(keys))
    cache.close()
    fresh = CallCache("judge", tmp_path)
    assert all(fresh.get(key) == {"n": n} for n, key in enumerate(keys))
    assert (fresh.hits, fresh.misses) == (200, 0)


@pytest.mark.parametrize("where", ["root is a file", "folder is a file"])
def test_an_unwritable_folder_never_raises(tmp_path: Path, where: str) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder", encoding="utf-8")
    if where == "root is a file":
        cache = CallCache("judge", blocker)
    else:
        cache = CallCache("judge", tmp_path)
        (tmp_path / "judge").write_text("not a folder", encoding="utf-8")
    assert cache.get(K1) is None
    cache.put(K1, {"v": 1})
    cache.put_later(K2, {"v": 2})
    cache.close()
    assert cache.writes == 0
    assert cache.get(K1) is None
    assert blocker.read_text(encoding="utf-8") == "not a folder"


def test_what_cannot_be_kept_is_dropped(tmp_path: Path) -> None:
    cache = CallCache("judge", tmp_path)
    bad: list[tuple[str, Any]] = [
        (K1, {"v": float("nan")}),  # not JSON
        (K2, {"v": object()}),
        ("not-a-key", {"v": 1}),  # its line could never be found
        (K3.upper(), {"v": 1}),
    ]
    for key, value in bad:
        cache.put(key, value)
    cache.close()
    assert cache.writes == 0
    assert lines(tmp_path / "judge") == []


def test_the_folder_is_assay_cache_dir(tmp_path: Path) -> None:
    assert cache_root({ENV_FOLDER: str(tmp_path)}) == tmp_path
    assert cache_root({}) == Path(".assay") / "cache"
    assert CallCache("agent", tmp_path).folder == tmp_path / "agent"
