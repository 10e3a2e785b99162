from decimal import Decimal

import pytest

from invoicekit.money import Money, to_cents


def test_rounding_half_up():
    assert to_cents("2.675") == Decimal("2.68")
    assert to_cents("2.665") == Decimal("2.67")


def test_add_and_subtract():
    a, b = Money.of("10.50", "eur"), Money.of("0.75", "EUR")
    assert (a + b).amount == Decimal("11.25")
    assert (a - b).amount == Decimal("9.75")


def test_currencies_do_not_mix():
    with pytest.raises(ValueError, match="EUR with USD"):
        Money.of(1, "EUR") + Money.of(1, "USD")


def test_times_rounds_to_cents():
    assert Money.of("19.99", "EUR").times("0.19").amount == Decimal("3.80")


@pytest.mark.parametrize("parts", [1, 2, 3, 7])
def test_allocate_adds_up(parts):
    m = Money.of("100.00", "EUR")
    shares = m.allocate(parts)
    assert len(shares) == parts
    assert sum(s.amount for s in shares) == m.amount
    assert max(s.amount for s in shares) - min(s.amount for s in shares) <= Decimal("0.01")


def test_allocate_rejects_zero_parts():
    with pytest.raises(ValueError):
        Money.of(1, "EUR").allocate(0)


def test_str():
    assert str(Money.of("1234.5", "usd")) == "1,234.50 USD"
