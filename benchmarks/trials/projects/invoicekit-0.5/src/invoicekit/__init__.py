"""Invoices, taxes and payment reminders for a small shop."""

from invoicekit.invoice import Invoice, Line
from invoicekit.money import Money
from invoicekit.settings import Settings, load_settings

__all__ = ["Invoice", "Line", "Money", "Settings", "load_settings"]
__version__ = "0.5.0"
