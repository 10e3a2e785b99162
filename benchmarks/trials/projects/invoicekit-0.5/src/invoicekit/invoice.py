"""An invoice: lines, VAT, totals, its number and its dates."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from invoicekit import dates, taxes
from invoicekit.money import Money
from invoicekit.settings import Settings


class CurrencyNotAccepted(ValueError):
    pass


@dataclass(frozen=True)
class Line:
    description: str
    quantity: int
    unit_price: Money

    @property
    def net(self) -> Money:
        return self.unit_price.times(self.quantity)


@dataclass
class Invoice:
    customer: str
    country: str
    currency: str
    issued: date
    settings: Settings
    number: str = ""
    lines: list[Line] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.currency = self.currency.upper()
        if self.currency not in self.settings.currencies:
            raise CurrencyNotAccepted(f"invoices cannot be issued in {self.currency}")

    @classmethod
    def create(cls, customer: str, country: str, currency: str, timestamp: float,
               settings: Settings) -> Invoice:
        return cls(customer, country, currency, dates.issue_date(timestamp), settings)

    def add(self, description: str, quantity: int, unit_price: Decimal | str) -> Line:
        line = Line(description, quantity, Money.of(unit_price, self.currency))
        self.lines.append(line)
        return line

    @property
    def net(self) -> Money:
        total = Money.of(0, self.currency)
        for line in self.lines:
            total = total + line.net
        return total

    @property
    def vat(self) -> Money:
        return self.net.times(taxes.rate_for(self.country))

    @property
    def total(self) -> Money:
        return self.net + self.vat

    @property
    def due(self) -> date:
        return dates.due_date(self.issued, self.settings.payment_terms_days)
