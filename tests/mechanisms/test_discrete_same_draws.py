"""The exact samplers' fast paths make the same draws as the plain algorithm (CKS 2020, Algorithms 1–3).

The reference below is the straightforward vectorisation (every coin of Algorithm 1 drawn
and scattered, the integer bound passed as an array, the float enclosure out of place);
the library's samplers skip steps that cannot change a value (the K = 1 coin of
Bernoulli(e⁻¹), stores of False over False, copies of all-true selections). Same seed →
the same numbers and the same generator state after, for every route of the Gaussian
acceptance (integer, float, rational via ``_widen``).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from mechanisms import discrete

_SAFE, _REL, _UNIT = 2**62, 2.0**-48, 2.0**-53


def ref_coin(rng, p, q, k):
    if int(np.max(q)) * k < _SAFE:
        return rng.integers(0, np.asarray(q, dtype=np.int64) * k, size=p.shape) < p
    first = rng.integers(0, k, size=p.shape) == 0 if k > 1 else np.ones(p.shape, dtype=bool)
    return first & (rng.integers(0, q, size=p.shape) < p)


def ref_bernoulli_exp(rng, p, q):
    p = np.asarray(p, dtype=np.int64).reshape(-1)
    q = int(q) if not np.ndim(q) else np.asarray(q, dtype=np.int64).reshape(-1)
    heads = ref_coin(rng, p, q, 1)
    out, index, k = ~heads, np.flatnonzero(heads), 2
    while index.size:
        heads = ref_coin(rng, p[index], q if isinstance(q, int) else q[index], k)
        out[index[~heads]] = k % 2 == 1
        index, k = index[heads], k + 1
    return out


def ref_geometric(rng, n):
    count, alive = np.zeros(n, dtype=np.int64), np.arange(n)
    while alive.size:
        alive = alive[ref_bernoulli_exp(rng, np.ones(alive.size, dtype=np.int64), 1)]
        count[alive] += 1
    return count


def ref_laplace(rng, t, n):
    out, filled = np.empty(n, dtype=np.int64), 0
    while filled < n:
        want = n - filled
        u = rng.integers(0, t, size=int(want * 1.62) + 8)
        u = u[ref_bernoulli_exp(rng, u, t)]
        x = u + t * ref_geometric(rng, u.size)
        negative = rng.integers(0, 2, size=x.size, dtype=np.int8) == 1
        y = np.where(negative, -x, x)[~(negative & (x == 0))][:want]
        out[filled: filled + y.size] = y
        filled += y.size
    return out


def ref_survive(rng, whole):
    alive, pending, j = np.ones(whole.size, dtype=bool), np.flatnonzero(whole > 0), 0
    while pending.size:
        survived = ref_bernoulli_exp(rng, np.ones(pending.size, dtype=np.int64), 1)
        alive[pending[~survived]] = False
        j += 1
        pending = pending[survived & (whole[pending] > j)]
    return alive


def ref_exact(rng, gamma, start_k=1, cell=None, whole_done=False):
    whole = gamma.numerator // gamma.denominator
    if not whole_done:
        for _ in range(whole):
            if not ref_bernoulli_exp(rng, np.ones(1, dtype=np.int64), 1)[0]:
                return False
    k = start_k
    while True:
        low, width = (Fraction(0), Fraction(1)) if cell is None else (Fraction(cell, 2**53), Fraction(1, 2**53))
        cell = None
        while low < (gamma - whole) / k < low + width:
            width /= 2**62
            low += int(rng.integers(0, 2**62)) * width
        if low >= (gamma - whole) / k:
            return k % 2 == 1
        k += 1


def ref_accept(rng, magnitude, t, s, widen):
    n = magnitude.size
    accept, denominator = np.zeros(n, dtype=bool), 2 * s * t * t
    rest = np.arange(n)
    if denominator < _SAFE and widen == 0.0:
        small = np.flatnonzero(magnitude < 2**31)
        diff = magnitude[small] * t - s
        small, diff = small[np.abs(diff) < 2**31], diff[np.abs(diff) < 2**31]
        alive = ref_survive(rng, diff * diff // denominator)
        accept[small[alive]] = ref_bernoulli_exp(rng, (diff * diff % denominator)[alive], denominator)
        unrouted = np.ones(n, dtype=bool)
        unrouted[small] = False
        rest = np.flatnonzero(unrouted)
    in_float = magnitude[rest] < 2**53
    fast, scratch, resume = rest[in_float], rest[~in_float].tolist(), []
    d = np.abs(magnitude[fast].astype(np.float64) - s / t)
    e = 2.0**-50 * (s / t + d)
    lo, hi = np.maximum(d - e, 0.0), d + e
    g_lo, g_hi = lo * lo / (2.0 * s) * (1 - _REL), hi * hi / (2.0 * s) * (1 + _REL) + widen
    whole = np.floor(g_lo)
    sure = whole == np.floor(g_hi)
    scratch += fast[~sure].tolist()
    fast, whole, f_lo, f_hi = fast[sure], whole[sure], (g_lo - whole)[sure], (g_hi - whole)[sure]
    index = np.flatnonzero(ref_survive(rng, whole))
    lo, hi, k = f_lo[index], f_hi[index], 1
    while index.size:
        cell = rng.integers(0, 2**53, size=index.size)
        heads = (cell + 1) * _UNIT <= lo / k * (1.0 - _REL)
        tails = cell * _UNIT >= hi / k * (1.0 + _REL)
        unsure = ~(heads | tails)
        resume += [(int(i), k, int(c)) for i, c in zip(fast[index[unsure]], cell[unsure], strict=True)]
        accept[fast[index[tails]]] = k % 2 == 1
        index, lo, hi, k = index[heads], lo[heads], hi[heads], k + 1
    gamma = [Fraction((int(m) * t - s) ** 2, 2 * s * t * t) for m in magnitude.tolist()]
    for i in scratch:
        accept[i] = ref_exact(rng, gamma[i])
    for i, k_at, cell_at in resume:
        accept[i] = ref_exact(rng, gamma[i], start_k=k_at, cell=cell_at, whole_done=True)
    return accept


def ref_gaussian(rng, s, n, widen=0.0):
    t, out, filled = math.isqrt(s) + 1, np.empty(n, dtype=np.int64), 0
    while filled < n:
        want = n - filled
        y = ref_laplace(rng, t, int(want * 1.45) + 8)
        y = y[ref_accept(rng, np.abs(y), t, s, widen)][:want]
        out[filled: filled + y.size] = y
        filled += y.size
    return out


def _same(draw, reference, args, seed, **kwargs):
    mine, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
    a, b = draw(mine, *args, **kwargs), reference(theirs, *args, *kwargs.values())
    assert np.array_equal(a, b)
    assert mine.bit_generator.state == theirs.bit_generator.state


@pytest.mark.parametrize("sigma2", [1, 16, 1000, 2**20 + 7, 2**29 + 3, 2**31, 2**40 + 1, 205318227979214136, 2**62])
@pytest.mark.parametrize("size", [0, 1, 30, 2000])
def test_discrete_gaussian_same_draws(sigma2, size):
    for seed in range(2):
        _same(discrete.discrete_gaussian, ref_gaussian, (sigma2, size), seed)


@pytest.mark.parametrize("sigma2", [16, 2**29 + 3, 205318227979214136])
def test_rational_route_same_draws(sigma2):
    _same(discrete.discrete_gaussian, ref_gaussian, (sigma2, 300), 3, _widen=0.5)


@pytest.mark.parametrize("scale", [1, 7, 2**20, 2**52])
def test_discrete_laplace_same_draws(scale):
    _same(discrete.discrete_laplace, ref_laplace, (scale, 3000), 1)


@pytest.mark.parametrize("q", [1, 3, 2**40, 2**61 + 1])
def test_bernoulli_exp_same_draws(q):
    rng = np.random.default_rng(4)
    p = rng.integers(0, q + 1, size=500)
    for denominators in (q, np.full(500, q), rng.integers(max(1, q // 2), q + 1, size=500)):
        numerators = np.minimum(p, denominators)
        _same(discrete.bernoulli_exp, ref_bernoulli_exp, (numerators, denominators), 2)
