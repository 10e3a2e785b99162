"""Tests for the demo cart. One fails and one errors on purpose, to give the debugger something to find."""

from __future__ import annotations

from decimal import Decimal

import pytest
from cart import Cart, Product

MUG = Product("MUG-01", "Enamel mug", Decimal("12.50"))
BEANS = Product("BEAN-250", "Coffee beans 250g", Decimal("9.00"))
GRINDER = Product("GRD-02", "Hand grinder", Decimal("40.00"))


class PaymentSandbox:
    """Client for the local payment sandbox, which is not running in this demo."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

    def connect(self) -> PaymentSandbox:
        raise ConnectionError(f"payment sandbox unreachable at {self.host}:{self.port}")

    def charge(self, amount: Decimal) -> str:
        return f"ch_{amount}"


@pytest.fixture
def cart() -> Cart:
    c = Cart()
    c.add(MUG, 2)
    c.add(BEANS)
    return c


@pytest.fixture
def payment_gateway() -> PaymentSandbox:
    return PaymentSandbox("127.0.0.1", 9).connect()


def test_item_count_adds_quantities(cart: Cart) -> None:
    cart.add(MUG)
    assert cart.item_count == 4


def test_remove_line(cart: Cart) -> None:
    cart.remove("BEAN-250")
    assert cart.item_count == 2
    assert cart.subtotal() == Decimal("25.00")


def test_small_order_pays_shipping(cart: Cart) -> None:
    assert cart.subtotal() == Decimal("34.00")
    assert cart.total() == Decimal("38.99")


def test_total_with_coupon() -> None:
    cart = Cart()
    cart.add(GRINDER)
    cart.add(BEANS, 2)
    coupon = "SAVE10"
    cart.apply_coupon(coupon)
    gross = Decimal("58.00")
    expected = Decimal("52.20")  # 58.00 - 10%, free shipping over 50.00
    actual = cart.total()
    assert actual == expected, f"{coupon} on {gross} should give {expected}"


def test_checkout_charges_card(cart: Cart, payment_gateway: PaymentSandbox) -> None:
    charge_id = payment_gateway.charge(cart.total())
    assert charge_id.startswith("ch_")


def test_print_receipt(cart: Cart) -> None:
    lines = cart.receipt_lines()
    for line in lines:
        print(line)
    assert lines[-1].split()[-1] == "38.99"
