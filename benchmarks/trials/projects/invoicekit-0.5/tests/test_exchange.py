import json
import os
from decimal import Decimal

from invoicekit.exchange import BUILT_IN, Rates, current_rates, read_rates_file
from invoicekit.money import Money


def test_built_in_rates_convert():
    rates = Rates(dict(BUILT_IN), "built-in")
    assert rates.to_eur(Money.of("110.00", "USD")) == Money.of("100.00", "EUR")


def test_rates_file_is_read(tmp_path):
    path = tmp_path / "rates.json"
    path.write_text(json.dumps({"date": "2026-11-27", "rates": {"USD": "1.25"}}), encoding="utf-8")
    rates = read_rates_file(path)
    assert rates.per_eur == {"USD": Decimal("1.25")}
    assert rates.to_eur(Money.of("125", "USD")) == Money.of("100", "EUR")


def test_current_rates_convert_every_currency():
    rates = current_rates()
    for code in rates.per_eur:
        assert rates.to_eur(Money.of("10", code)).currency == "EUR"


def test_published_rates_are_in_force():
    # the rates job publishes its file in CI (INVOICEKIT_RATES_FILE); elsewhere the built-in rates apply
    expected = os.environ.get("INVOICEKIT_RATES_FILE") or "built-in"
    assert current_rates().source == expected
