"""When to remind a customer of an unpaid invoice: doubling delays, spread a little at random so
that a batch of invoices does not send all its reminders in the same minute."""

from __future__ import annotations

import random

JITTER = 0.25
"""Each delay moves by up to this fraction of itself, either way."""


def reminder_delays(first_hours: float, count: int, jitter: float = JITTER,
                    rng: random.Random | None = None) -> list[float]:
    """Hours from the due date to each reminder: first_hours, then doubling, each jittered."""
    if first_hours <= 0 or count < 0:
        raise ValueError("first_hours must be positive and count non-negative")
    source = rng if rng is not None else random
    delays = []
    for i in range(count):
        nominal = first_hours * 2 ** i
        delays.append(round(nominal * (1 + source.uniform(-jitter, jitter)), 3))
    return delays
