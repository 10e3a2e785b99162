"""A small shop whose loyalty tiers come from the environment (TIERS="gold,silver,bronze")."""

import os

DEFAULT_TIERS = "gold,silver,bronze"


def tiers() -> list[str]:
    return os.environ.get("TIERS", DEFAULT_TIERS).split(",")


def discount(tier: str) -> float:
    rates = dict(zip(tiers(), (0.2, 0.1, 0.05), strict=False))
    return rates[tier]
