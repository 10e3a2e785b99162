"""Settings from the environment and an optional `.env` file at the project root."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

PREFIX = "INVOICEKIT_"


@dataclass(frozen=True)
class Settings:
    currencies: tuple[str, ...] = ("EUR", "USD")
    number_prefix: str = "INV"
    payment_terms_days: int = 30
    vat_rates: dict[str, Decimal] = field(default_factory=dict)
    audit_log: str = ""
    rates_file: str = ""
    source: dict[str, str] = field(default_factory=dict, compare=False)


def read_dotenv(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of a `.env` file; comments and blank lines are skipped."""
    values: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):]
        key, sep, value = line.partition("=")
        if not sep:
            continue
        values[key.strip()] = value.strip().strip("'\"")
    return values


def parse_currencies(raw: str) -> tuple[str, ...]:
    codes = [code.strip().upper() for code in raw.split(",")]
    return tuple(code for code in codes if code)


def parse_vat_rates(raw: str) -> dict[str, Decimal]:
    """The VAT rates a deployment sets: `CODE=RATE` entries (see the README); a rate is a fraction
    ("0.135") or a percentage ("13.5%")."""
    pairs = [entry.partition("=") for entry in raw.split(",")]
    return {
        code.strip().upper(): Decimal(rate.strip().removesuffix("%")) / (100 if "%" in rate else 1)
        for code, sep, rate in pairs
        if sep
    }


def load_settings(root: Path | None = None, environ: dict[str, str] | None = None) -> Settings:
    """The settings in force: the environment wins over `.env`, which wins over the defaults."""
    env = dict(os.environ if environ is None else environ)
    values: dict[str, str] = {}
    if root is not None and (root / ".env").is_file():
        values.update(read_dotenv(root / ".env"))
    values.update({k: v for k, v in env.items() if k.startswith(PREFIX)})
    kwargs: dict[str, object] = {}
    if PREFIX + "CURRENCIES" in values:
        kwargs["currencies"] = parse_currencies(values[PREFIX + "CURRENCIES"])
    if PREFIX + "NUMBER_PREFIX" in values:
        kwargs["number_prefix"] = values[PREFIX + "NUMBER_PREFIX"]
    if PREFIX + "PAYMENT_TERMS" in values:
        kwargs["payment_terms_days"] = int(values[PREFIX + "PAYMENT_TERMS"])
    if PREFIX + "VAT_RATES" in values:
        kwargs["vat_rates"] = parse_vat_rates(values[PREFIX + "VAT_RATES"])
    if PREFIX + "AUDIT_LOG" in values:
        kwargs["audit_log"] = values[PREFIX + "AUDIT_LOG"]
    if PREFIX + "RATES_FILE" in values:
        kwargs["rates_file"] = values[PREFIX + "RATES_FILE"]
    return Settings(**kwargs, source=values)  # type: ignore[arg-type]
