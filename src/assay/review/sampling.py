"""Which production calls are sampled: a seeded draw from the call's number alone.

Pure arithmetic, cheap enough for every call of a production function
(docs/decisions/0039-online.md). Call ``i`` (0, 1, 2 … in the order the
wrapper saw them) is sampled when

    x_i = SplitMix64(seed, i) < T,    T = round(K · 2⁶⁴)

where ``SplitMix64(seed, i)`` is the (i+1)-th output of Steele, Lea and
Flood's SplitMix64 generator ("Fast splittable pseudorandom number
generators", OOPSLA 2014; Vigna's ``splitmix64.c``) started from ``seed``:

    z = (seed + (i + 1) · γ) mod 2⁶⁴,               γ = 0x9E3779B97F4A7C15
    z = ((z ⊕ (z ≫ 30)) · 0xBF58476D1CE4E5B9) mod 2⁶⁴
    z = ((z ⊕ (z ≫ 27)) · 0x94D049BB133111EB) mod 2⁶⁴
    x = z ⊕ (z ≫ 31)

Each x_i is (to within 2⁻⁶⁴) uniform on [0, 2⁶⁴), so each call is sampled
with probability K, independently of the others as far as any test can
tell. A counter hash rather than a stream of ``random.random()`` draws:
whether call ``i`` was sampled is a function of (seed, i) alone, so it can be
recomputed for one call without replaying the others, and calls made from
several threads at once cannot swap their draws.
"""

from __future__ import annotations

import math
import secrets

_MASK = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
#: The seeds a sampler takes: what SplitMix64's 64-bit state holds.
SEED_BITS = 64


def splitmix64(seed: int, index: int) -> int:
    """The (index+1)-th output of SplitMix64 seeded with ``seed`` (the formula above)."""
    z = (seed + (index + 1) * _GAMMA) & _MASK
    z = ((z ^ (z >> 30)) * _MIX1) & _MASK
    z = ((z ^ (z >> 27)) * _MIX2) & _MASK
    return z ^ (z >> 31)


def new_seed() -> int:
    """A fresh seed, for a sampler not given one (it is recorded either way)."""
    return secrets.randbits(SEED_BITS)


def check_rate(sample: object) -> float:
    """``sample`` as a rate in (0, 1]; ValueError saying why it is not one."""
    if isinstance(sample, bool) or not isinstance(sample, int | float):
        raise ValueError(f"sample is a fraction of calls in (0, 1], such as 0.05; "
                         f"not {sample!r}")
    rate = float(sample)
    if not math.isfinite(rate) or rate <= 0.0 or rate > 1.0:
        raise ValueError(f"sample is a fraction of calls in (0, 1], such as 0.05; not {sample!r}"
                         + (" (a rate of 0 would record nothing)" if rate == 0.0 else ""))
    return rate


def check_seed(seed: object) -> int:
    """``seed`` as a sampler seed (a whole number in [0, 2⁶⁴)); ValueError otherwise."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= _MASK:
        raise ValueError(f"seed is a whole number from 0 to 2**64 - 1; not {seed!r}")
    return seed


class Sampler:
    """Decides, from the call's number, whether a call is sampled at rate ``rate``."""

    __slots__ = ("rate", "seed", "threshold")

    def __init__(self, rate: float, seed: int) -> None:
        self.rate = check_rate(rate)
        self.seed = check_seed(seed)
        #: T = round(K · 2⁶⁴): x < T for a share K of the 2⁶⁴ possible x (all of them at K = 1).
        self.threshold = round(self.rate * (1 << 64))

    def chosen(self, index: int) -> bool:
        """Whether call ``index`` is sampled (inlined from ``splitmix64``: it runs per call)."""
        z = (self.seed + (index + 1) * _GAMMA) & _MASK
        z = ((z ^ (z >> 30)) * _MIX1) & _MASK
        z = ((z ^ (z >> 27)) * _MIX2) & _MASK
        return (z ^ (z >> 31)) < self.threshold
