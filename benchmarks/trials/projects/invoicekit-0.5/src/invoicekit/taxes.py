"""VAT rates by country, with temporary overrides (for tests and for special cases)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

DEFAULT_RATES: dict[str, Decimal] = {
    "DE": Decimal("0.19"),
    "FR": Decimal("0.20"),
    "NL": Decimal("0.21"),
    "IE": Decimal("0.23"),
    "US": Decimal("0"),
}

_rates: dict[str, Decimal] = dict(DEFAULT_RATES)
_lookups: dict[str, Decimal] = {}


def rate_for(country: str) -> Decimal:
    """The VAT rate of `country` (ISO code); looked up once, then remembered."""
    code = country.upper()
    if code not in _lookups:
        try:
            _lookups[code] = _rates[code]
        except KeyError:
            raise LookupError(f"no VAT rate known for {country!r}") from None
    return _lookups[code]


def register(country: str, rate: Decimal | str) -> None:
    code = country.upper()
    _rates[code] = Decimal(rate)
    _lookups.pop(code, None)


@contextmanager
def override(country: str, rate: Decimal | str) -> Iterator[None]:
    """Use `rate` for `country` inside the block; the previous rate comes back after it."""
    code = country.upper()
    previous = _rates.get(code)
    register(code, rate)
    try:
        yield
    finally:
        if previous is None:
            _rates.pop(code, None)
        else:
            _rates[code] = previous
        _lookups.pop(code, None)
