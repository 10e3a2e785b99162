import random

import pytest

from invoicekit.reminders import reminder_delays


def test_reminders_escalate():
    delays = reminder_delays(24, 5)
    assert len(delays) == 5
    assert all(later > earlier for earlier, later in zip(delays, delays[1:])), delays


def test_no_jitter_gives_doubling():
    assert reminder_delays(12, 4, jitter=0) == [12, 24, 48, 96]


def test_own_random_source_is_reproducible():
    a = reminder_delays(24, 3, rng=random.Random(7))
    b = reminder_delays(24, 3, rng=random.Random(7))
    assert a == b


def test_bad_arguments():
    with pytest.raises(ValueError):
        reminder_delays(0, 3)
    with pytest.raises(ValueError):
        reminder_delays(24, -1)
