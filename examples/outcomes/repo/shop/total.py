"""The total of a basket."""


def total(prices: list[float], discount: float = 0.0) -> float:
    """The sum of the prices, less the discount (a fraction: 0.1 is 10 %)."""
    subtotal = sum(prices)
    return round(subtotal - discount, 2)
