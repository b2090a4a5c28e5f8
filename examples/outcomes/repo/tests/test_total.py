from shop.total import total


def test_no_discount():
    assert total([2.5, 7.5]) == 10.0


def test_ten_percent_off():
    assert total([20.0, 30.0], discount=0.1) == 45.0
