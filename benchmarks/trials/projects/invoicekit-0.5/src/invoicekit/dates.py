"""Issue and due dates. An invoice is dated in UTC, whatever the server's clock says."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone


def issue_date(timestamp: float) -> date:
    """The calendar date (UTC) an invoice created at `timestamp` carries."""
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).date()


def add_business_days(start: date, days: int) -> date:
    """`days` working days after `start` (Saturdays and Sundays are skipped)."""
    current = start
    remaining = days
    while remaining > 0:
        current += timedelta(days=1)
        if current.weekday() < 5:
            remaining -= 1
    return current


def due_date(issued: date, terms_days: int) -> date:
    """Payment is due `terms_days` calendar days after issue, moved to the next Monday when that
    falls on a weekend."""
    due = issued + timedelta(days=terms_days)
    while due.weekday() >= 5:
        due += timedelta(days=1)
    return due


def month_key(day: date) -> str:
    return f"{day.year:04d}-{day.month:02d}"
