"""assay: evaluate AI agents honestly.

The public names are loaded on first use, so that ``assay --help`` and
``import assay`` stay fast (pydantic and friends load only when needed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .version import __version__

__all__ = ["AgentError", "Case", "PolicyDenied", "Refused", "Suite", "__version__", "expect",
           "online", "publish_gated"]

if TYPE_CHECKING:
    from . import expect
    from .analysis.gate import PolicyDenied, publish_gated
    from .model import Case, Suite
    from .sampling.online import online
    from .targets.python import AgentError, Refused


def __getattr__(name: str) -> Any:
    import importlib

    if name in ("Suite", "Case"):
        return getattr(importlib.import_module("assay.model"), name)
    if name == "expect":
        return importlib.import_module("assay.expect")
    if name in ("PolicyDenied", "publish_gated"):
        return getattr(importlib.import_module("assay.analysis.gate"), name)
    if name == "online":
        return importlib.import_module("assay.sampling.online").online
    if name in ("AgentError", "Refused"):
        return getattr(importlib.import_module("assay.targets.python"), name)
    raise AttributeError(f"module 'assay' has no attribute {name!r}")
