from shop import discount


def price(amount: float, tier: str) -> float:
    return round(amount * (1 - discount(tier)), 2)


def test_gold_price():
    print("pricing 100.0 for gold")
    assert price(100.0, "gold") == 80.0


def test_unknown_tier_is_refused():
    import pytest

    with pytest.raises(KeyError):
        price(100.0, "platinum")
