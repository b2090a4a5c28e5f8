"""What a model's tokens cost: a small shipped table the user can extend.

Cost is part of the result (principle 6), but a price assay does not know is
never guessed: an unknown model costs ``None`` and its cost evidence is
``unavailable``. Prices are USD per million tokens, as published by the
provider; ``ASSAY_PRICES`` names a YAML or JSON file whose entries are added
to (and override) the shipped ones::

    my-local-model: {input: 0.0, output: 0.0}
    gpt-4o-mini: {input: 0.15, output: 0.60}
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError

#: The variable naming the user's price file.
PRICES_ENV = "ASSAY_PRICES"


@dataclass(frozen=True)
class Price:
    """USD per million input and output tokens."""

    input: float
    output: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """What these tokens cost, in USD."""
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


#: List prices of a few hosted models (USD / 1M tokens, standard tier, as
#: published in 2025). Local models have no price until the user gives one.
SHIPPED: dict[str, Price] = {
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "o4-mini": Price(1.10, 4.40),
}

# A dated snapshot (``gpt-4o-mini-2024-07-18``) costs what its family costs.
_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")


class PriceTable:
    """Looks prices up by exact model name, or by a dated snapshot's family name."""

    def __init__(self, prices: dict[str, Price]) -> None:
        self.prices = dict(prices)

    def lookup(self, *names: str | None) -> Price | None:
        """The price of the first of ``names`` that is known; None if none is."""
        for name in names:
            if not name:
                continue
            for candidate in (name, _SNAPSHOT.sub("", name)):
                if candidate in self.prices:
                    return self.prices[candidate]
        return None


def load_prices(env: dict[str, str] | None = None) -> PriceTable:
    """The shipped table plus the user's ``ASSAY_PRICES`` file; a bad file is a usage error."""
    env = dict(os.environ) if env is None else env
    table = dict(SHIPPED)
    where = env.get(PRICES_ENV)
    if where:
        table.update(_read(Path(where)))
    return PriceTable(table)


def _read(path: Path) -> dict[str, Price]:
    import yaml  # YAML is a superset of JSON: one parser for both

    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{PRICES_ENV}={path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{PRICES_ENV}={path}: not YAML or JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{PRICES_ENV}={path}: expected a mapping of model → "
                         "{input: USD per 1M tokens, output: USD per 1M tokens}")
    prices: dict[str, Price] = {}
    for model, entry in data.items():
        if not isinstance(entry, dict) or set(entry) != {"input", "output"} or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
            for v in entry.values()
        ):
            raise UsageError(f"{PRICES_ENV}={path}: model {model!r}: expected "
                             "{input: N, output: N} in USD per 1M tokens, N ≥ 0")
        prices[str(model)] = Price(float(entry["input"]), float(entry["output"]))
    return prices
