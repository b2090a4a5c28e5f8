"""The registry's records: an ``agent`` ledger entry as read back, and what the start
rule reads of one stored battery (SPEC §8, docs/decisions/0027-registry.md).

Data only: the store reads them (``store/registry.py``), the rules fold them
(``analysis/registry.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

#: What an ``agent`` entry records.
Action = Literal["publish", "start", "stop"]
ACTIONS: Final[tuple[str, ...]] = ("publish", "start", "stop")
#: A version as the registry takes it: exactly what ``identity_digest`` writes.
VERSION: Final = re.compile(r"sha256:[0-9a-f]{64}")
#: A version's state, from its newest entry.
State = Literal["published", "started", "stopped"]


@dataclass(frozen=True)
class AgentEntry:
    """One ``agent`` ledger entry as read back.

    ``content`` is None when the content is erased or is not a JSON object;
    ``intact`` is False when its bytes no longer hash to the entry's digest or
    the entry's hash does not cover its fields (edited in place).
    """

    index: int
    content: Mapping[str, Any] | None
    intact: bool = True

    @property
    def action(self) -> str | None:
        """``publish``, ``start`` or ``stop`` (None: unreadable)."""
        value = (self.content or {}).get("action")
        return value if value in ACTIONS else None

    @property
    def version(self) -> str | None:
        """The version the entry names (None: unreadable or malformed)."""
        value = (self.content or {}).get("version")
        return value if isinstance(value, str) and VERSION.fullmatch(value) else None

    @property
    def usable(self) -> bool:
        """Whether the registry folds this entry: intact, with an action and a version."""
        return self.intact and self.action is not None and self.version is not None


@dataclass(frozen=True)
class BatteryFacts:
    """What the start rule reads of one stored run.

    ``seal_entry`` is the index of its ``run-sealed`` entry (None: not sealed
    in the ledger); ``breaches`` names the cases with a failed structural
    verdict, hidden ones as ``holdout-N`` only.
    """

    run_id: str
    suite_id: str
    target_digest: str
    status: str
    seal_entry: int | None
    seal_hash: str | None
    passed: bool | None
    interrupted: bool | None
    breaches: tuple[str, ...] = ()

    @property
    def sealed(self) -> bool:
        """Sealed, and by an entry of the ledger."""
        return self.status == "sealed" and self.seal_entry is not None
