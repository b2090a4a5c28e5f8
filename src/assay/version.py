"""assay's version, in a module of its own so that any room can name it without
importing the package's public surface (``assay/__init__``), which sits on top."""

from __future__ import annotations

__version__ = "0.1.0"
