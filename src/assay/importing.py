"""Import a user's ``module:function``, with their folder importable (as pytest's rootdir)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


class ImportFailed(ValueError):
    """The user's module would not import.

    ``missing`` names a module it imports that is not installed (not the
    user's module itself, nor a package of its path), so that a caller can
    say how to install it.
    """

    def __init__(self, message: str, missing: str | None = None) -> None:
        super().__init__(message)
        self.missing = missing


def resolve_function(spec: str, base_dir: Path | None = None) -> Callable[..., Any]:
    """The callable named by ``pkg.module:function``; ``ValueError`` says why not."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{spec!r} is not of the form module:function")
    if base_dir is not None:
        folder = str(base_dir.resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module failed to import: say how
        missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
        ours = module_name.split(".")
        if missing is not None and missing in {".".join(ours[:n]) for n in range(1, len(ours) + 1)}:
            missing = None  # the module named in the spec is not there: a path, not a package
        raise ImportFailed(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}",
                           missing) from None
    func: Any = module
    for part in attr.split("."):
        func = getattr(func, part, None)
        if func is None:
            raise ValueError(f"module {module_name!r} has no {attr!r}")
    if not callable(func):
        raise ValueError(f"{spec!r} is not callable")
    return func  # type: ignore[no-any-return]
