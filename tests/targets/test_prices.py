"""The price table: shipped prices, the user's file, and no guessed prices."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.errors import UsageError
from assay.targets.prices import SHIPPED, Price, load_prices


def test_the_shipped_table_prices_known_models_and_their_dated_snapshots() -> None:
    table = load_prices({})
    assert table.lookup("gpt-4o-mini") == SHIPPED["gpt-4o-mini"]
    assert table.lookup("gpt-4o-mini-2024-07-18") == SHIPPED["gpt-4o-mini"]
    assert table.lookup("gpt-4o-2024-08-06") == SHIPPED["gpt-4o"]


@pytest.mark.parametrize("name", ["gpt-4o-mini-high", "gpt-4", "llama3", "", None])
def test_an_unknown_model_has_no_price_not_a_near_one(name: str | None) -> None:
    assert load_prices({}).lookup(name) is None


def test_the_first_known_name_wins() -> None:
    table = load_prices({})
    assert table.lookup("served-name", "gpt-4o") == SHIPPED["gpt-4o"]
    assert table.lookup("gpt-4.1", "gpt-4o") == SHIPPED["gpt-4.1"]


def test_the_users_file_adds_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text('{"my-model": {"input": 1, "output": 2}, '
                    '"gpt-4o": {"input": 0, "output": 0}}', encoding="utf-8")
    table = load_prices({"ASSAY_PRICES": str(path)})
    assert table.lookup("my-model") == Price(1.0, 2.0)
    assert table.lookup("gpt-4o") == Price(0.0, 0.0)
    assert table.lookup("gpt-4o-mini") == SHIPPED["gpt-4o-mini"]
    assert Price(1.0, 2.0).cost(1_000_000, 500_000) == pytest.approx(2.0)


@pytest.mark.parametrize("text", ["[1, 2]", "m: 3", "m: {input: 1}", "m: {input: -1, output: 1}",
                                  "m: {input: 1, output: true}", "m: {input: 1, output: 2, x: 3}",
                                  "m: [unclosed"])
def test_a_bad_price_file_is_a_usage_error_naming_it(tmp_path: Path, text: str) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match="ASSAY_PRICES"):
        load_prices({"ASSAY_PRICES": str(path)})


def test_a_missing_price_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="ASSAY_PRICES"):
        load_prices({"ASSAY_PRICES": str(tmp_path / "nope.yaml")})
