import re
import threading

from invoicekit.numbering import Numberer, numberer_for


def test_numbers_are_formatted(settings):
    n = Numberer(settings.number_prefix, 2026)
    first = n.next_number()
    assert re.fullmatch(r"[A-Z]{2,10}-2026-\d{6}", first), first
    assert first.endswith("-000001")


def test_numbers_continue_from_start():
    n = Numberer("INV", 2026, start=41)
    assert n.next_number() == "INV-2026-000042"
    assert n.last == 42


def test_numbers_are_unique_across_threads():
    issued: list[int] = []

    def audit(number: int) -> None:
        issued.append(number)

    n = Numberer("INV", 2026, on_issue=audit)

    def draw() -> None:
        for _ in range(15000):
            n.next_number()

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(issued) == 60000
    assert len(set(issued)) == 60000, "the same invoice number was issued twice"
    assert n.last == 60000


def test_numbers_follow_the_settings(settings):
    n = numberer_for(settings, 2026, start=99)
    assert n.next_number() == f"{settings.number_prefix}-2026-000100"
    assert n.next_number() == f"{settings.number_prefix}-2026-000101"
    assert n.last == 101
