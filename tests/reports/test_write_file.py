"""A report file is written whole, and a path that is not a plain file is never renamed over."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from assay.reports.common import write_file


def test_a_link_is_followed_and_kept(tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_file(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_a_device_is_written_in_place_not_replaced() -> None:
    # Renaming a temporary file over /dev/null (as root) would replace the device.
    write_file(Path("/dev/null"), "report")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert not list(Path("/dev").glob(".null.*.tmp"))


def test_a_plain_file_is_replaced_whole(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "r.json"
    write_file(path, "one")
    write_file(path, "two")
    assert path.read_text() == "two" and sorted(p.name for p in path.parent.iterdir()) == [
        "r.json"]
