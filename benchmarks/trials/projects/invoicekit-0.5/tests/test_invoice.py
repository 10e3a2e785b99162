from datetime import date, datetime, timezone
from decimal import Decimal

import pytest

from invoicekit import Invoice
from invoicekit.dates import month_key
from invoicekit.invoice import CurrencyNotAccepted


def ts(*args: int) -> float:
    return datetime(*args, tzinfo=timezone.utc).timestamp()


def test_german_invoice_vat(settings):
    inv = Invoice.create("Müller GmbH", "DE", "EUR", ts(2026, 11, 2, 9, 0), settings)
    inv.add("Consulting", 3, "120.00")
    inv.add("Travel", 1, "59.90")
    assert inv.net.amount == Decimal("419.90")
    assert inv.vat.amount == Decimal("79.78")
    assert inv.total.amount == Decimal("499.68")


def test_us_customer_pays_no_vat_in_usd(settings):
    inv = Invoice.create("Acme Inc.", "US", "USD", ts(2026, 11, 2, 9, 0), settings)
    inv.add("Licence", 2, "250")
    assert inv.vat.amount == Decimal("0.00")
    assert str(inv.total) == "500.00 USD"


def test_currency_outside_settings_is_refused(plain_settings):
    with pytest.raises(CurrencyNotAccepted):
        Invoice.create("Tanaka KK", "JP", "JPY", ts(2026, 11, 2, 9, 0), plain_settings)


def test_invoice_dates_and_month(settings):
    # issued in the evening of the last day of March (UTC): it belongs to March's books
    inv = Invoice.create("Dupont SA", "FR", "EUR", ts(2026, 3, 31, 19, 30), settings)
    assert inv.issued == date(2026, 3, 31)
    assert month_key(inv.issued) == "2026-03"


def test_due_date_follows_payment_terms(plain_settings):
    inv = Invoice.create("Dupont SA", "FR", "EUR", ts(2026, 11, 2, 9, 0), plain_settings)
    assert inv.due == date(2026, 12, 2)


def test_every_configured_currency_can_be_invoiced(settings):
    for currency in settings.currencies:
        inv = Invoice.create("Anyone", "NL", currency, ts(2026, 11, 2, 9, 0), settings)
        inv.add("Item", 1, "10")
        assert inv.total.amount == Decimal("12.10")
