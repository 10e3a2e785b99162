"""Exchange rates to EUR: built-in reference rates, or the file the rates job publishes
(`INVOICEKIT_RATES_FILE`, JSON: {"date": "...", "rates": {"USD": "1.08", ...}})."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from pathlib import Path

from invoicekit.money import Money, to_cents
from invoicekit.settings import load_settings

log = logging.getLogger("invoicekit.exchange")

BUILT_IN = {"EUR": Decimal("1"), "USD": Decimal("1.10"), "GBP": Decimal("0.85"), "CHF": Decimal("0.95")}


@dataclass(frozen=True)
class Rates:
    per_eur: dict[str, Decimal]
    source: str

    def to_eur(self, amount: Money) -> Money:
        return Money(to_cents(amount.amount / self.per_eur[amount.currency]), "EUR")


def read_rates_file(path: Path) -> Rates:
    data = json.loads(path.read_text(encoding="utf-8-sig"))
    return Rates({code: Decimal(str(rate)) for code, rate in data["rates"].items()}, str(path))


@cache
def current_rates() -> Rates:
    """The rates in force, read once per process: the published file when configured and readable,
    else the built-in ones."""
    path = load_settings(Path.cwd()).rates_file
    if path:
        try:
            return read_rates_file(Path(path))
        except (OSError, ValueError, KeyError) as exc:
            log.warning("could not read the rates file %s (%s); using the built-in rates", path, exc)
    return Rates(dict(BUILT_IN), "built-in")
