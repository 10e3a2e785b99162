"""Amounts of money: exact decimals, rounded to the cent the way accountants do."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def to_cents(value: Decimal | int | str) -> Decimal:
    return Decimal(value).quantize(CENT, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str

    @classmethod
    def of(cls, amount: Decimal | int | str, currency: str) -> Money:
        return cls(to_cents(amount), currency.upper())

    def __add__(self, other: Money) -> Money:
        self._same_currency(other)
        return Money(self.amount + other.amount, self.currency)

    def __sub__(self, other: Money) -> Money:
        self._same_currency(other)
        return Money(self.amount - other.amount, self.currency)

    def times(self, factor: Decimal | int | str) -> Money:
        return Money(to_cents(self.amount * Decimal(factor)), self.currency)

    def allocate(self, parts: int) -> list[Money]:
        """Split into `parts` amounts that add up exactly: the first ones get the odd cents."""
        if parts < 1:
            raise ValueError("parts must be at least 1")
        cents = int(self.amount / CENT)
        share, rest = divmod(cents, parts)
        return [Money(Decimal(share + (1 if i < rest else 0)) * CENT, self.currency) for i in range(parts)]

    def _same_currency(self, other: Money) -> None:
        if other.currency != self.currency:
            raise ValueError(f"cannot combine {self.currency} with {other.currency}")

    def __str__(self) -> str:
        return f"{self.amount:,.2f} {self.currency}"
