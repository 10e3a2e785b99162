"""A tiny shopping cart: products, quantities, coupons and shipping."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")
FREE_SHIPPING_OVER = Decimal("50.00")
SHIPPING_FEE = Decimal("4.99")
COUPONS: dict[str, Decimal] = {"SAVE10": Decimal("0.10"), "SAVE25": Decimal("0.25")}


@dataclass(frozen=True)
class Product:
    """Something a customer can buy; prices are Decimal so cents never drift."""

    sku: str
    name: str
    price: Decimal


@dataclass
class LineItem:
    """A product and how many of it are in the cart."""

    product: Product
    quantity: int

    @property
    def amount(self) -> Decimal:
        return self.product.price * self.quantity


@dataclass
class Cart:
    """A customer's cart: line items keyed by SKU plus an optional coupon."""

    lines: dict[str, LineItem] = field(default_factory=dict)
    coupon: str | None = None

    def add(self, product: Product, quantity: int = 1) -> None:
        if quantity < 1:
            raise ValueError(f"quantity must be at least 1, got {quantity}")
        if product.sku in self.lines:
            self.lines[product.sku].quantity += quantity
        else:
            self.lines[product.sku] = LineItem(product, quantity)

    def remove(self, sku: str) -> None:
        del self.lines[sku]

    def apply_coupon(self, code: str) -> None:
        if code not in COUPONS:
            raise KeyError(f"unknown coupon {code!r}")
        self.coupon = code

    @property
    def item_count(self) -> int:
        return sum(line.quantity for line in self.lines.values())

    def discount_rate(self) -> Decimal:
        return COUPONS[self.coupon] if self.coupon else Decimal(0)

    def subtotal(self) -> Decimal:
        gross = sum((line.amount for line in self.lines.values()), Decimal(0))
        # The cart page shows customers their discounted price.
        return _money(gross * (1 - self.discount_rate()))

    def shipping(self) -> Decimal:
        return Decimal("0.00") if self.subtotal() >= FREE_SHIPPING_OVER else SHIPPING_FEE

    def total(self) -> Decimal:
        discounted = self.subtotal() * (1 - self.discount_rate())
        return _money(discounted + self.shipping())

    def receipt_lines(self) -> list[str]:
        lines = [
            f"{line.quantity} x {line.product.name:<20} {line.amount:>8}" for line in self.lines.values()
        ]
        lines.append(f"{'subtotal':<24} {self.subtotal():>8}")
        lines.append(f"{'shipping':<24} {self.shipping():>8}")
        lines.append(f"{'total':<24} {self.total():>8}")
        return lines


def _money(amount: Decimal) -> Decimal:
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)
