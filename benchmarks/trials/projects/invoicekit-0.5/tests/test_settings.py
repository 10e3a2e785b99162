from decimal import Decimal

from invoicekit.settings import (
    Settings,
    load_settings,
    parse_currencies,
    parse_vat_rates,
    read_dotenv,
)


def test_defaults_without_environment():
    assert load_settings(None, environ={}) == Settings()


def test_environment_overrides_defaults():
    s = load_settings(None, environ={"INVOICEKIT_CURRENCIES": "EUR,CHF", "INVOICEKIT_PAYMENT_TERMS": "14"})
    assert s.currencies == ("EUR", "CHF")
    assert s.payment_terms_days == 14


def test_unrelated_variables_are_ignored():
    s = load_settings(None, environ={"CURRENCIES": "JPY", "HOME": "/root"})
    assert s.currencies == ("EUR", "USD")


def test_currency_codes_are_upper_cased():
    assert parse_currencies("eur,usd") == ("EUR", "USD")


def test_empty_currency_entries_are_dropped():
    assert parse_currencies("EUR,,USD,") == ("EUR", "USD")


def test_dotenv_file(tmp_path):
    (tmp_path / ".env").write_text(
        "# deploy settings\nINVOICEKIT_NUMBER_PREFIX='SHOP'\n\nexport INVOICEKIT_PAYMENT_TERMS=21\n",
        encoding="utf-8",
    )
    assert read_dotenv(tmp_path / ".env") == {
        "INVOICEKIT_NUMBER_PREFIX": "SHOP",
        "INVOICEKIT_PAYMENT_TERMS": "21",
    }
    s = load_settings(tmp_path, environ={})
    assert s.number_prefix == "SHOP"
    assert s.payment_terms_days == 21


def test_environment_wins_over_dotenv(tmp_path):
    (tmp_path / ".env").write_text("INVOICEKIT_NUMBER_PREFIX=FILE\n", encoding="utf-8")
    s = load_settings(tmp_path, environ={"INVOICEKIT_NUMBER_PREFIX": "ENV"})
    assert s.number_prefix == "ENV"


def test_rates_as_fractions_or_percentages():
    assert parse_vat_rates("IE=0.135") == {"IE": Decimal("0.135")}
    assert parse_vat_rates("IE=13.5%") == {"IE": Decimal("0.135")}


def test_vat_rates_from_the_environment():
    s = load_settings(None, environ={"INVOICEKIT_VAT_RATES": "IE=0.135"})
    assert s.vat_rates == {"IE": Decimal("0.135")}
    assert parse_vat_rates("") == {}
