from decimal import Decimal

import pytest

from invoicekit import taxes


def test_known_rates():
    assert taxes.rate_for("fr") == Decimal("0.20")
    assert taxes.rate_for("US") == Decimal("0")


def test_unknown_country():
    with pytest.raises(LookupError, match="XX"):
        taxes.rate_for("XX")


def test_override_changes_the_rate_inside_the_block():
    with taxes.override("DE", "0.07"):  # reduced rate, e.g. for books
        assert taxes.rate_for("DE") == Decimal("0.07")


def test_override_of_a_new_country():
    with taxes.override("ZZ", "0.10"):
        assert taxes.rate_for("ZZ") == Decimal("0.10")
