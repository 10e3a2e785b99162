from datetime import date

from invoicekit.dates import add_business_days, due_date, month_key


def test_business_days_skip_weekends():
    friday = date(2026, 11, 27)
    assert add_business_days(friday, 1) == date(2026, 11, 30)
    assert add_business_days(friday, 5) == date(2026, 12, 4)


def test_zero_business_days():
    assert add_business_days(date(2026, 11, 28), 0) == date(2026, 11, 28)


def test_due_date_on_a_weekday():
    assert due_date(date(2026, 11, 2), 30) == date(2026, 12, 2)


def test_due_date_moves_off_the_weekend():
    # 2026-11-28 + 14 days = Saturday 2026-12-12 -> Monday 2026-12-14
    assert due_date(date(2026, 11, 28), 14) == date(2026, 12, 14)


def test_month_key():
    assert month_key(date(2026, 3, 9)) == "2026-03"
