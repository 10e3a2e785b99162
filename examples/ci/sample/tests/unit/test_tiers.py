from shop import discount, tiers


def test_every_tier_has_a_discount():
    assert [discount(t) for t in tiers()] == [0.2, 0.1, 0.05]


def test_silver_gets_ten_percent():
    assert discount("silver") == 0.1
