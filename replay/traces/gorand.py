"""Go's ``math/rand`` seeded generator, value for value, for ``dralab trace openb --compat fgd-go``.

The FGD paper's simulator draws every random choice of a run (pod shuffle, inflation, node-name prefixes)
from Go's global ``math/rand`` source seeded with the run's seed. Reproducing its runs decision for decision
needs the same stream, so this is Go's algorithm (Go 1 compatibility freezes it; src/math/rand/rng.go and
rand.go): an additive lagged Fibonacci generator, x[n] = x[n-607] + x[n-273] mod 2^64 (Mitchell and Reeds),
seeded by a Park-Miller sequence XORed with ``rngCooked``.

``rngCooked`` is the state of that same generator after 7.8e12 steps from ``srand(1)`` (Go's
gen_cooked.go). Go ships the 607 numbers as a table; here they are recomputed, which takes under a second:
the recurrence is linear over Z/2^64, so stepping it N times is multiplying by t^N modulo its characteristic
polynomial t^607 - t^334 - 1 (43 squarings of a 607-term polynomial), not 7.8e12 additions. The tests
check the result against published outputs of Go (seed 1: ``Int()`` is 5577006791947779410).

Only the methods the simulator's run uses are here, each with the exact draw pattern of its Go namesake
(rejection loops included), because one draw more or less shifts every later decision.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TypeVar

import numpy as np

T = TypeVar("T")
LEN, TAP = 607, 273
MASK64 = (1 << 64) - 1
MASK63 = (1 << 63) - 1
_A, _M, _Q, _R = 48271, (1 << 31) - 1, 44488, 3399
COOK_STEPS = 7_800_000_000_000  # gen_cooked.go: `for i := uint64(0); i < 7.8e12; i++ { vrand() }`


def _seedrand(x: int) -> int:
    """x[n+1] = 48271 x[n] mod (2^31 - 1), Schrage's method as Go writes it (no intermediate overflow)."""
    hi, lo = divmod(x, _Q)
    x = _A * lo - _R * hi
    return x + _M if x < 0 else x


def _polymulmod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a * b modulo t^607 - t^334 - 1, coefficients in Z/2^64 (uint64 arrays wrap, which is the ring)."""
    prod = np.zeros(2 * LEN - 1, dtype=np.uint64)
    for i in np.flatnonzero(a):
        prod[i:i + LEN] += a[i] * b
    return _reduce(prod)


def _reduce(p: np.ndarray) -> np.ndarray:
    """Fold degrees >= 607 down with t^(607+k) = t^(334+k) + t^k; each fold lowers the top degree by 273."""
    while len(p) > LEN:
        high = p[LEN:]
        n = len(high)
        low = np.zeros(max(LEN, LEN - TAP + n), dtype=np.uint64)
        low[:LEN] = p[:LEN]
        low[:n] += high
        low[LEN - TAP:LEN - TAP + n] += high
        p = low
    return p


def _t_power(n: int) -> np.ndarray:
    """t^n modulo the characteristic polynomial, by square and multiply from the top bit."""
    result = np.zeros(LEN, dtype=np.uint64)
    result[0] = 1
    for bit in bin(n)[2:]:
        result = _polymulmod(result, result)
        if bit == "1":
            result = np.concatenate([np.zeros(1, dtype=np.uint64), result])  # times t
            result = _reduce(result)
    return result


def _seed_words(x: int, hi_shift: int, mid_shift: int) -> list[int]:
    """The 607 seeding words both Go seeders build from a Park-Miller sequence (20 values skipped, then three
    per word). gen_cooked.go's ``srand`` shifts by (20, 10), rngSource.Seed by (40, 20)."""
    words = [0] * LEN
    for i in range(-20, LEN):
        x = _seedrand(x)
        if i >= 0:
            u = x << hi_shift
            x = _seedrand(x)
            u ^= x << mid_shift
            x = _seedrand(x)
            words[i] = u ^ x
    return words


@lru_cache(maxsize=1)
def cooked() -> tuple[int, ...]:
    """The 607 64-bit values Go calls ``rngCooked``: the generator's buffer after COOK_STEPS steps of vrand.

    Time: step k (from 0) adds slot (606 - k) into slot (333 - k) (both mod 607) and the sum is x_k, so
    slot (333 - k) mod 607 holds x_{k-607} before step k. Writing the buffer's start as x_{-607}..x_{-1}
    (x_{-607+i} in slot (333 - i) mod 607), x_{-607+m} is the start combined with the coefficients of t^m mod
    P; after N steps slot (333 - N - j) mod 607 holds x_{N-607+j}, j = 0..606."""
    start = _seed_words(1, 20, 10)  # gen_cooked.go's srand(1)
    basis = np.array([start[(333 - i) % LEN] for i in range(LEN)], dtype=np.uint64)  # x_{-607+i}
    poly = _t_power(COOK_STEPS)  # coefficients of x_{-607+N} = x_{N-607}
    out = [0] * LEN
    for j in range(LEN):
        with np.errstate(over="ignore"):
            value = int(np.sum(poly * basis, dtype=np.uint64))
        out[(333 - COOK_STEPS - j) % LEN] = value & MASK64
        poly = _reduce(np.concatenate([np.zeros(1, dtype=np.uint64), poly]))  # t^(N+j+1)
    return tuple(out)


class GoRand:
    """``rand.New(rand.NewSource(seed))`` (equivalently the global source after ``rand.Seed(seed)``)."""

    __slots__ = ("_vec", "_tap", "_feed", "draws")

    def __init__(self, seed: int) -> None:
        table = cooked()
        self._tap, self._feed = 0, LEN - TAP
        seed %= _M  # Go's % truncates toward zero; for a negative seed it then adds _M
        if seed == 0:
            seed = 89482311
        self._vec = [(w ^ c) & MASK64 for w, c in zip(_seed_words(seed, 40, 20), table, strict=True)]
        self.draws = 0  # Int63 values consumed, for tests and traces of the stream

    def uint64(self) -> int:
        self._tap = self._tap - 1 if self._tap else LEN - 1
        self._feed = self._feed - 1 if self._feed else LEN - 1
        x = (self._vec[self._feed] + self._vec[self._tap]) & MASK64
        self._vec[self._feed] = x
        self.draws += 1
        return x

    def int63(self) -> int:
        return self.uint64() & MASK63

    def int31(self) -> int:
        return self.int63() >> 32

    def uint32(self) -> int:
        return self.int63() >> 31

    def int_(self) -> int:
        """Go's ``Int()`` (named so as not to shadow ``int`` in this class's annotations): on a 64-bit
        machine ``u << 1 >> 1`` of a 63-bit value, i.e. ``Int63()``."""
        return self.int63()

    def int63n(self, n: int) -> int:
        if n <= 0:
            raise ValueError("invalid argument to Int63n")
        if n & (n - 1) == 0:
            return self.int63() & (n - 1)
        top = MASK63 - (1 << 63) % n
        v = self.int63()
        while v > top:
            v = self.int63()
        return v % n

    def int31n(self, n: int) -> int:
        """The exported ``Int31n``: rejection then modulo."""
        if n <= 0:
            raise ValueError("invalid argument to Int31n")
        if n & (n - 1) == 0:
            return self.int31() & (n - 1)
        top = (1 << 31) - 1 - (1 << 31) % n
        v = self.int31()
        while v > top:
            v = self.int31()
        return v % n

    def _int31n_lemire(self, n: int) -> int:
        """The unexported ``int31n`` that ``Shuffle`` uses (Lemire's multiply-shift, a different stream)."""
        prod = self.uint32() * n
        low = prod & 0xFFFFFFFF
        if low < n:
            thresh = ((1 << 32) - n) % n
            while low < thresh:
                prod = self.uint32() * n
                low = prod & 0xFFFFFFFF
        return prod >> 32

    def intn(self, n: int) -> int:
        if n <= 0:
            raise ValueError("invalid argument to Intn")
        return self.int31n(n) if n <= (1 << 31) - 1 else self.int63n(n)

    def float64(self) -> float:
        while True:
            f = self.int63() / (1 << 63)
            if f != 1.0:
                return f

    def perm(self, n: int) -> list[int]:
        m = [0] * n
        for i in range(n):
            j = self.intn(i + 1)
            m[i] = m[j]
            m[j] = i
        return m

    def shuffle(self, items: list[T]) -> None:
        """``Shuffle(len(items), swap)`` on a list, in place."""
        i = len(items) - 1
        while i > 0:
            j = self._int31n_lemire(i + 1)
            items[i], items[j] = items[j], items[i]
            i -= 1
