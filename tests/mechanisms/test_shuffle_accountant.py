"""The shuffle accountant against brute-force enumeration, exact product laws and closed forms."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from mechanisms import shuffle_accountant as acc

# --------------------------------------------------------------------------- helpers (slow references)


def _hockey(p: dict, q: dict, eps: float) -> float:
    keys = set(p) | set(q)
    return sum(max(p.get(k, 0.0) - math.exp(eps) * q.get(k, 0.0), 0.0) for k in keys)


def _brute_count_laws(others: tuple[int, ...], gamma: float) -> tuple[dict, dict]:
    """Enumerate every message vector of all users; the shuffled view of bits is their count."""
    laws = []
    for first in (0, 1):
        bits = (first, *others)
        q = [gamma / 2 + (1 - gamma) * b for b in bits]
        law: dict[int, float] = {}
        for y in itertools.product((0, 1), repeat=len(bits)):
            prob = math.prod(qi if yi else 1 - qi for qi, yi in zip(q, y, strict=True))
            law[sum(y)] = law.get(sum(y), 0.0) + prob
        laws.append(law)
    return laws[0], laws[1]


def _brute_enhanced_view(others: tuple[int, ...], gamma: float) -> tuple[dict, dict]:
    """View (who among the others randomized, count): enumerate each user's (randomize?, coin)."""
    outcomes = [("keep", None), ("rand", 0), ("rand", 1)]
    weight = {"keep": 1 - gamma, "rand": gamma / 2}
    laws = []
    for first in (0, 1):
        law: dict = {}
        for own in outcomes:
            own_bit = first if own[0] == "keep" else own[1]
            for rest in itertools.product(outcomes, repeat=len(others)):
                prob = weight[own[0]] * math.prod(weight[r[0]] for r in rest)
                count = own_bit + sum(b if r[0] == "keep" else r[1] for b, r in zip(others, rest, strict=True))
                key = (tuple(r[0] == "rand" for r in rest), count)
                law[key] = law.get(key, 0.0) + prob
        laws.append(law)
    return laws[0], laws[1]


# --------------------------------------------------------------------------- bit sum


@pytest.mark.parametrize("n", [3, 5])
@pytest.mark.parametrize("gamma", [0.2, 0.6])
def test_bitsum_configuration_delta_equals_brute_force(n, gamma):
    for others in itertools.product((0, 1), repeat=n - 1):
        p, q = _brute_count_laws(others, gamma)
        for eps in (0.0, 0.3, 1.0, 2.0):
            brute = max(_hockey(p, q, eps), _hockey(q, p, eps))
            exact = acc.bitsum_delta_for_configuration(n, gamma, eps, sum(others))
            assert exact == pytest.approx(brute, abs=1e-13)


@pytest.mark.parametrize("n", [3, 5])
@pytest.mark.parametrize("gamma", [0.2, 0.6])
def test_bitsum_certified_delta_is_the_enhanced_view_and_bounds_every_configuration(n, gamma):
    for eps in (0.0, 0.3, 1.0, 2.0):
        certified = acc.bitsum_delta(n, gamma, eps)
        worst_count = 0.0
        for others in itertools.product((0, 1), repeat=n - 1):
            p, q = _brute_enhanced_view(others, gamma)
            # the enhanced view's divergence does not depend on the others' data
            assert max(_hockey(p, q, eps), _hockey(q, p, eps)) == pytest.approx(certified, abs=1e-13)
            pc, qc = _brute_count_laws(others, gamma)
            worst_count = max(worst_count, _hockey(pc, qc, eps), _hockey(qc, pc, eps))
        assert worst_count <= certified + 1e-13


def test_references_data_point_n1000_gamma_n_60():
    # docs/references.md: n = 1000, delta = 1e-5, gamma n = 60 gives eps ~ 0.99.
    assert acc.bitsum_epsilon(1000, 60 / 1000, 1e-5) == pytest.approx(0.99, abs=0.01)
    # the count alone with all others holding 0 is tighter (not used to certify)
    exact_k0 = acc.bitsum_delta_for_configuration(1000, 0.06, 0.85, 0)
    assert exact_k0 <= 1e-5 < acc.bitsum_delta(1000, 0.06, 0.85)


def test_bitsum_epsilon_is_the_bisection_of_delta():
    n, gamma, delta = 400, 0.1, 1e-6
    eps = acc.bitsum_epsilon(n, gamma, delta)
    assert acc.bitsum_delta(n, gamma, eps) <= delta
    assert acc.bitsum_delta(n, gamma, eps - 1e-5) > delta


@pytest.mark.parametrize(
    ("n", "local_eps"),
    [(1000, e) for e in (0.25, 0.5, 1.0, 1.5, 2.0, 3.0)] + [(10_000, e) for e in (2.0, 3.0, 4.0)],
)
def test_never_looser_than_feldman_mcmillan_talwar(n, local_eps):
    delta = 1e-6
    if local_eps > acc.fmt_max_local_epsilon(n, delta):
        with pytest.raises(ValueError, match="local_epsilon"):
            acc.fmt_epsilon(local_eps, n, delta)
        return
    gamma = 2.0 / (math.exp(local_eps) + 1.0)  # bit randomizer with local privacy eps0
    assert acc.bitsum_local_epsilon(gamma) == pytest.approx(local_eps)
    assert acc.bitsum_epsilon(n, gamma, delta) <= acc.fmt_epsilon(local_eps, n, delta)


def test_calibrated_gamma_is_minimal():
    n, eps, delta = 2000, 0.5, 1e-6
    gamma = acc.calibrate_bitsum_gamma(n, eps, delta, rtol=1e-4)
    assert acc.bitsum_delta(n, gamma, eps) <= delta
    assert acc.bitsum_delta(n, gamma * (1 - 2e-4), eps) > delta


# --------------------------------------------------------------------------- vector summation


def _shift_pair(trials: int, shift: int) -> tuple[np.ndarray, np.ndarray]:
    base = stats.binom.pmf(np.arange(trials + 1), trials, 0.5)
    upper = np.concatenate([np.zeros(shift), base])
    lower = np.concatenate([base, np.zeros(shift)])
    return upper, lower


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 2.0])
def test_vector_pld_sandwiches_the_exact_shift_pair(eps):
    n, bits, levels = 100, 10, 4  # shift 8 against sd 15.8: losses span ~10 nats, 1e-4 bins
    up, lo = _shift_pair(n * bits, 2 * levels)
    exact = lambda e: float(np.maximum(up - math.exp(e) * lo, 0).sum())  # noqa: E731
    certified = acc.vector_sum_delta(n, bits, levels, eps)
    # pessimistic: losses rounded up by at most one bin of width 1e-4 * max(1, eps)
    assert exact(eps) - 1e-12 <= certified <= exact(eps - 1e-4 * max(1.0, eps)) + 1e-12


@pytest.mark.parametrize("eps", [0.5, 1.5, 3.0])
def test_vector_pld_composes_coordinates_like_the_exact_product(eps):
    n, bits, levels = 10, 2, 3
    up, lo = _shift_pair(n * bits, 2 * levels)
    up2, lo2 = np.outer(up, up), np.outer(lo, lo)
    exact = lambda e: float(np.maximum(up2 - math.exp(e) * lo2, 0).sum())  # noqa: E731
    certified = acc.vector_sum_delta(n, bits, levels, eps, coordinates=2)
    assert exact(eps) - 1e-12 <= certified <= exact(eps - 2e-4 * max(1.0, eps)) + 1e-12


def test_dominating_pair_bounds_real_neighbours_and_is_attained(rounding_law):
    """Enumerate neighbouring data sets (one value replaced) of a 3-user, 1-coordinate protocol."""
    n, bits, levels, bound = 3, 2, 2, 1.0
    noise = stats.binom.pmf(np.arange(n * bits + 1), n * bits, 0.5)
    grid = np.linspace(-1, 1, 7)
    others_law = np.convolve(rounding_law(0.3, bound, levels), rounding_law(-0.55, bound, levels))
    base = np.convolve(others_law, noise)
    for eps in (0.2, 0.8, 1.5):
        certified = acc.vector_sum_delta(n, bits, levels, eps)
        worst = 0.0
        for v, w in itertools.product(grid, grid):
            p = np.convolve(base, rounding_law(v, bound, levels))
            q = np.convolve(base, rounding_law(w, bound, levels))
            worst = max(worst, float(np.maximum(p - math.exp(eps) * q, 0).sum()))
        assert worst <= certified + 1e-12
    # attained: others at exact levels (no rounding noise), one value moved from -L to +L
    eps = 0.8
    p = np.convolve(noise, rounding_law(1.0, bound, levels))
    q = np.convolve(noise, rounding_law(-1.0, bound, levels))
    attained = float(np.maximum(p - math.exp(eps) * q, 0).sum())
    assert attained <= acc.vector_sum_delta(n, bits, levels, eps) <= attained + 5e-4


def test_calibrated_noise_bits_is_minimal_and_beats_the_paper_constant():
    n, eps, delta, d = 2000, 1.0, 1e-6, 3
    levels = acc.default_levels(n, d)
    assert levels == max(math.ceil(2 * math.sqrt(n)), d, 4)
    bits = acc.calibrate_noise_bits(n, eps, delta, levels, coordinates=d)
    assert acc.vector_sum_delta(n, bits, levels, eps, coordinates=d) <= delta
    assert acc.vector_sum_delta(n, bits - 1, levels, eps, coordinates=d) > delta
    paper = 24e4 * levels**2 * math.log(4 * d**2 / delta) ** 2 / (eps**2 * n)
    assert acc.paper_noise_bits(n, eps, delta, d) == pytest.approx(paper)
    assert bits < paper / 1000


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="gamma"):
        acc.bitsum_delta(10, 1.5, 1.0)
    with pytest.raises(ValueError, match="n must"):
        acc.bitsum_delta(1, 0.5, 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        acc.bitsum_delta(10, 0.5, -1.0)
    with pytest.raises(ValueError, match="delta"):
        acc.bitsum_epsilon(10, 0.5, 0.0)
    with pytest.raises(ValueError, match="ones"):
        acc.bitsum_delta_for_configuration(10, 0.5, 1.0, 10)
    with pytest.raises(ValueError, match="noise_bits"):
        acc.vector_sum_delta(10, 0, 2, 1.0)
    with pytest.raises(TypeError, match="levels"):
        acc.vector_sum_delta(10, 2, 2.5, 1.0)
    with pytest.raises(ValueError, match="coordinates"):
        acc.calibrate_noise_bits(10, 1.0, 1e-6, 4, coordinates=0)


def test_large_binomial_matches_its_gaussian_limit():
    """N = n b = 4.5e7 noise bits: the shift pair is Gaussian to within a few percent.

    Guards against cancellation in log-binomials at large N (a direct gammaln
    difference lost ~1e-6 per loss and made delta non-monotone in b).
    """
    n, bits, levels, m, eps = 10_000, 4456, 200, 5, 1.0
    mu = 2 * levels * math.sqrt(m) / (math.sqrt(n * bits) / 2)
    gauss = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
    certified = acc.vector_sum_delta(n, bits, levels, eps, coordinates=m)
    assert certified == pytest.approx(gauss, rel=0.05)
    assert acc.vector_sum_delta(n, bits + 200, levels, eps, coordinates=m) < certified
