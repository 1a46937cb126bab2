"""The l2-aware composition of shuffled vector summation against brute-force enumeration.

References written here: the exact output law of the whole protocol for tiny n, d and
levels (every user's rounding law convolved with the noise bits, coordinate by
coordinate, then the product over coordinates), its hockey-stick divergence maximised
over a grid of neighbouring inputs, and the exact product of binomial shift pairs.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from mechanisms import shuffle_vector_accountant as acc


def _product_hockey(ps: list[np.ndarray], qs: list[np.ndarray], eps: float) -> float:
    """``sum max(P - e^eps Q, 0)`` of two product laws given by their coordinates' pmfs."""
    p, q = ps[0], qs[0]
    for pi, qi in zip(ps[1:], qs[1:], strict=True):
        p, q = np.multiply.outer(p, pi), np.multiply.outer(q, qi)
    return float(np.maximum(p - math.exp(eps) * q, 0.0).sum())


def _output_laws(users: np.ndarray, bound: float, levels: int, bits: int, rounding_law) -> list[np.ndarray]:
    """Exact pmf of each coordinate's ones-count: every user's rounding law and ``Bin(n b, 1/2)``."""
    n = users.shape[0]
    noise = stats.binom.pmf(np.arange(n * bits + 1), n * bits, 0.5)
    laws = []
    for j in range(users.shape[1]):
        law = noise
        for v in users[:, j]:
            law = np.convolve(law, rounding_law(float(v), bound, levels))
        laws.append(law)
    return laws


def _upper_triangle(x: np.ndarray) -> np.ndarray:
    rows, cols = np.triu_indices(x.size)
    return np.outer(x, x)[rows, cols]


def _disc(radii: tuple[float, ...], angles: int) -> list[np.ndarray]:
    points = [np.zeros(2)]
    for r, k in itertools.product(radii, range(angles)):
        points.append(r * np.array([math.cos(2 * math.pi * k / angles), math.sin(2 * math.pi * k / angles)]))
    return points


def _brute_delta(sent: list[np.ndarray], other: np.ndarray, levels: int, bits: int, eps: float,
                 rounding_law) -> float:
    """Worst hockey-stick divergence over ordered pairs of the changed user's sent coordinates."""
    laws = [_output_laws(np.stack([v, other]), 1.0, levels, bits, rounding_law) for v in sent]
    return max(_product_hockey(p, q, eps) for p, q in itertools.permutations(laws, 2))


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_outer_products_brute_force_is_below_the_l2_bound_which_is_below_the_box_bound(eps, rounding_law):
    """n = 2, d = 2 (3 sent entries of x x^T, ||x|| <= 1), g = 2, b = 8: every pair on a grid of the disc."""
    levels, bits, n, m = 2, 8, 2, 3
    sent = [_upper_triangle(x) for x in _disc((0.5, 0.8, 1.0), 16)]
    worst = max(_brute_delta(sent, _upper_triangle(other), levels, bits, eps, rounding_law)
                for other in (np.zeros(2), np.array([0.6, 0.3])))
    a, b = acc.INPUT_SHIFTS["psd_trace"]
    l2 = acc.vector_sum_delta(n, bits, levels, eps, m, max_shift=a, l2_shift=b)
    box = acc.vector_sum_delta(n, bits, levels, eps, m)
    assert acc.level_shifts(levels, m, max_shift=a, l2_shift=b) == (3, 3, 2)  # box: (4, 4, 4)
    assert worst <= l2 + 1e-12
    assert l2 < 0.8 * box
    # e1 e1^T against e2 e2^T (levels shift by (g, 0, -g), no rounding) is on the grid and is
    # attained exactly by the product of its two shift pairs
    pair = _shift_pair_product((levels, levels), n * bits, eps)
    assert worst >= pair - 1e-12


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_l2_ball_vectors_brute_force_is_below_the_l2_bound_which_is_below_the_box_bound(eps, rounding_law):
    """n = 2, d = 2, ||v|| <= 1, g = 2, b = 8: every pair on a grid of the disc (x against -x included)."""
    levels, bits, n, m = 2, 8, 2, 2
    sent = _disc((0.5, 0.9, 1.0), 16)
    worst = max(_brute_delta(sent, other, levels, bits, eps, rounding_law)
                for other in (np.zeros(2), np.array([0.3, -0.5])))
    a, b = acc.INPUT_SHIFTS["l2_ball"]
    l2 = acc.vector_sum_delta(n, bits, levels, eps, m, max_shift=a, l2_shift=b)
    box = acc.vector_sum_delta(n, bits, levels, eps, m)
    assert acc.level_shifts(levels, m, max_shift=a, l2_shift=b) == (4, 3)  # box: (4, 4)
    assert worst <= l2 + 1e-12
    assert l2 < box


def _shift_pair_product(shifts: tuple[int, ...], trials: int, eps: float) -> float:
    base = stats.binom.pmf(np.arange(trials + 1), trials, 0.5)
    ups = [np.concatenate([np.zeros(s), base]) for s in shifts]
    los = [np.concatenate([base, np.zeros(s)]) for s in shifts]
    return _product_hockey(ups, los, eps)


@pytest.mark.parametrize("eps", [0.5, 1.5])
def test_pld_of_unequal_shifts_sandwiches_the_exact_product(eps):
    n, bits, levels, m = 10, 3, 3, 3
    shifts = acc.level_shifts(levels, m, max_shift=1.0, l2_shift=math.sqrt(2))
    assert shifts == (4, 4, 3)  # min(2g, floor(g min(1, sqrt(2/i))) + 1), g = 3
    exact = lambda e: _shift_pair_product(shifts, n * bits, e)  # noqa: E731
    certified = acc.vector_sum_delta(n, bits, levels, eps, m, max_shift=1.0, l2_shift=math.sqrt(2))
    assert exact(eps) - 1e-12 <= certified <= exact(eps - m * 1e-4 * max(1.0, eps)) + 1e-12


def test_per_rank_shifts_bound_every_sampled_outer_product_pair():
    """Sorted |level shifts| of x x^T against x' x'^T (d = 5, ||x||, ||x'|| <= 1) stay below K rank by rank."""
    rng = np.random.default_rng(5)
    d, levels = 5, 90
    m = d * (d + 1) // 2
    bound = np.array(acc.level_shifts(levels, m, max_shift=1.0, l2_shift=math.sqrt(2)))
    x = rng.normal(size=(20_000, 2, d))
    x /= np.linalg.norm(x, axis=2, keepdims=True)
    x *= rng.uniform(0.5, 1.0, size=(20_000, 2, 1)) ** 0.1
    x[:5, 0], x[:5, 1] = np.eye(d), np.roll(np.eye(d), 1, axis=0)  # e_i against e_{i+1}: two entries move by L
    tau = np.sort(np.abs(np.stack([_upper_triangle(a) - _upper_triangle(b) for a, b in x])) * levels, axis=1)[:, ::-1]
    assert np.all(np.ceil(tau) <= bound)
    assert np.max(np.ceil(tau[:, 0])) == levels  # the cap is reached (e_i against e_j)
    # and the l2 bound of the change, 2 L^2 over the sent entries, is approached
    assert np.max((tau**2).sum(axis=1)) / levels**2 == pytest.approx(2.0, abs=1e-9)


def test_l2_calibration_needs_fewer_bits_and_box_is_the_old_composition():
    n, eps, delta, d = 2000, 8.0, 0.02, 5
    m, levels = d * (d + 1) // 2, acc.default_levels(2000, 5)
    assert acc.level_shifts(levels, m) == (2 * levels,) * m
    box = acc.calibrate_noise_bits(n, eps, delta, levels, m)
    l2 = acc.calibrate_noise_bits(n, eps, delta, levels, m, max_shift=1.0, l2_shift=math.sqrt(2))
    assert acc.vector_sum_delta(n, l2, levels, eps, m, max_shift=1.0, l2_shift=math.sqrt(2)) <= delta
    assert acc.vector_sum_delta(n, l2 - 1, levels, eps, m, max_shift=1.0, l2_shift=math.sqrt(2)) > delta
    # Gaussian analogue: the noise variance scales with ||K||^2 (sum of K_i^2 against m (2g)^2)
    ratio = sum(k * k for k in acc.level_shifts(levels, m, max_shift=1.0, l2_shift=math.sqrt(2))) / (m * 4 * levels**2)
    assert l2 / box == pytest.approx(ratio, rel=0.1)


def test_bad_shift_bounds_name_the_argument():
    with pytest.raises(ValueError, match="max_shift"):
        acc.level_shifts(4, 3, max_shift=2.5)
    with pytest.raises(ValueError, match="l2_shift"):
        acc.level_shifts(4, 3, l2_shift=0.0)
    with pytest.raises(TypeError, match="coordinates"):
        acc.level_shifts(4, 1.5)


def _all_pairs_reference(n, noise_bits, levels, coordinates, interval, max_shift, l2_shift, pair=None):
    """vector_sum_pld as written before issue 32: every pair held, then rounded at the widest width."""
    import collections

    pair = pair or acc._shift_pair_losses
    counts = collections.Counter(acc.level_shifts(levels, coordinates, max_shift=max_shift, l2_shift=l2_shift))
    pairs = {shift: pair(n * noise_bits, shift) for shift in counts}
    for loss, _, _ in pairs.values():
        interval = max(interval, float(loss.max() - loss.min()) / acc._MAX_BINS)
    total = None
    for shift, count in sorted(counts.items(), reverse=True):
        pld = acc._rounded_pld(*pairs[shift], interval)
        pld = pld if count == 1 else pld.self_compose(count)
        total = pld if total is None else total.compose(pld)
    return total


def _same_pld(a, b):
    for side in ("_pmf_remove", "_pmf_add"):
        pa, pb = getattr(a, side), getattr(b, side)
        assert type(pa) is type(pb)
        assert pa._discretization == pb._discretization and pa._infinity_mass == pb._infinity_mass
        assert pa._lower_loss == pb._lower_loss
        np.testing.assert_array_equal(pa._probs, pb._probs)


@pytest.mark.parametrize("n, bits, coordinates, shifts", [
    (50, 300, 3, (2.0, None)), (3000, 170, 55, acc.INPUT_SHIFTS["psd_trace"]),
    (30_000, 80_000, 10, acc.INPUT_SHIFTS["l2_ball"])])
def test_pairs_made_one_at_a_time_give_the_all_pairs_pld(n, bits, coordinates, shifts):
    levels = acc.default_levels(n, coordinates)
    streamed = acc.vector_sum_pld(n, bits, levels, coordinates, interval=1e-4, max_shift=shifts[0], l2_shift=shifts[1])
    _same_pld(streamed, _all_pairs_reference(n, bits, levels, coordinates, 1e-4, *shifts))


def test_a_later_pair_needing_wider_bins_restarts_at_its_width(monkeypatch):
    # Not seen with the real pairs (the largest shift needs the widest bins); forced here: the
    # smallest shift's losses are stretched, so it needs the widest bins and comes last.
    real = acc._shift_pair_losses

    def stretched(trials, shift):
        loss, mass, infinity = real(trials, shift)
        return (loss * 50.0 if shift == 7 else loss), mass, infinity

    monkeypatch.setattr(acc, "_shift_pair_losses", stretched)
    calls = []
    monkeypatch.setattr(acc, "_rounded_pld", lambda *a, _r=acc._rounded_pld: calls.append(a[-1]) or _r(*a))
    streamed = acc.vector_sum_pld(200, 50, 12, 3, interval=1e-6, max_shift=2.0, l2_shift=1.0)
    assert sorted(set(acc.level_shifts(12, 3, max_shift=2.0, l2_shift=1.0))) == [7, 9, 13]
    reference = _all_pairs_reference(200, 50, 12, 3, 1e-6, 2.0, 1.0, pair=stretched)
    _same_pld(streamed, reference)
    assert len(set(calls)) == 2 and calls[-1] == max(calls)  # rounded at a narrower width first, then again
