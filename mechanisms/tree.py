r"""Binary-tree continual release of prefix sums of vectors and symmetric matrices (paper §J.3).

The mechanism of Dwork et al. (2010) and Chan, Shi & Song (2011), as instantiated
by Shariff & Sheffet (2018, §4.2) and the paper (Appendix J.3, "We instantiate the
above tree-based algorithm with symmetric Gaussian noise at every node"): every
dyadic node holds the exact sum of its interval plus independent Gaussian noise;
the prefix sum at time t is the sum of the nodes named by the binary digits of t,
so it carries popcount(t) node noises. The whole horizon is charged once, at
construction, before any noise is drawn.

Privacy (zCDP, Bun & Steinke 2016)
----------------------------------
Levels. With horizon T, node lengths are 2^j ≤ T, i.e. j = 0, …, ⌊log₂ T⌋, so
L = ⌊log₂ T⌋ + 1 = ⌈log₂(T + 1)⌉ levels, and element x_s lies in at most one
node per level: at most L nodes. (dp-accounting's
``SingleEpochTreeAggregationDpEvent`` uses the same depth.)

One node. Let D = x_s − x_s' be the change of one element under the stated
neighbouring relation, ‖D‖ ≤ Δ (L2 for vectors, Frobenius for matrices).
For vectors the node is the Gaussian mechanism with i.i.d. N(0, σ²) noise:
D_α = α‖D‖²/(2σ²) ≤ αΔ²/(2σ²).

Symmetrised noise. For symmetric (d, d) elements the node noise is
Z = (Z' + Z'ᵀ)/2 with Z'ᵢⱼ i.i.d. N(0, σ²). Then Zᵢᵢ = Z'ᵢᵢ ~ N(0, σ²), and for
i < j, Zᵢⱼ = Zⱼᵢ = (Z'ᵢⱼ + Z'ⱼᵢ)/2 ~ N(0, σ²/2); the d(d + 1)/2 upper-triangle
entries are independent and determine the node. D is symmetric, so the Rényi
divergence of order α between the two node distributions is

    α/2 · [ Σᵢ Dᵢᵢ²/σ² + Σ_{i<j} Dᵢⱼ²/(σ²/2) ] = α (Σᵢ Dᵢᵢ² + 2 Σ_{i<j} Dᵢⱼ²)/(2σ²)
                                                  = α ‖D‖_F² / (2σ²).

Halving the off-diagonal variance is exactly offset by each off-diagonal
difference counting twice in the Frobenius norm: a symmetrised node is
‖D‖_F²/(2σ²)-zCDP, the same constant as for vectors, with σ² the variance of
the diagonal noise (off-diagonal entries have σ²/2). No constant is lost or
gained by symmetrising; the bound is tight for every D (it depends on D only
through ‖D‖_F).

Whole horizon. The released prefix sums are post-processing of the noisy
nodes; x_s changes at most L of them, each a Gaussian mechanism of
sensitivity Δ, so by (adaptive) zCDP composition the stream is

    ρ = L · Δ² / (2σ²)  zCDP,

charged in full even when T is not a power of two (some elements then lie in
fewer than L completed nodes): conservative, never below the true loss. Noise
calibrated from a cost is rounded up (``accounting.convert.gaussian_sigma``).

Element bounds. ``sensitivity`` Δ bounds ‖x_s − x_s'‖: each appended element is
checked (or, with ``invalid="clip"``, clipped) against the norm bound B that makes
this true for any two admissible elements — Δ/2 under replace-one, Δ under
add/remove, Δ/√2 for PSD matrices under replace-one — with the float and PSD slack
the charge pays for: :mod:`mechanisms.stream_elements`.
"""

from __future__ import annotations

import abc
import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from accounting import GDP, ZCDP, Budgeted, Chargeable, Cost
from accounting.convert import gaussian_rho_exact, gaussian_sigma
from accounting.validation import check_int, check_state_memory
from mechanisms.base import Mechanism
from mechanisms.lattice import GaussianLattice, NoiseStream, gdp_mu_squared, gdp_sigma
from mechanisms.noise import round_up
from mechanisms.outer_product import OuterProduct
from mechanisms.release import Release, check_account, check_generator, check_positive
from mechanisms.stream_elements import INVALID_CHOICES, NORM_SLACK, PSD_TOLERANCE, StreamElements, check_stream_shape

__all__ = ["INVALID_CHOICES", "NORM_SLACK", "PSD_TOLERANCE", "BinaryTreeMechanism", "ContinualRelease", "NodeNoise",
           "OuterProduct", "check_stream_shape", "tree_depth", "StreamElements"]

FloatArray = npt.NDArray[np.float64]


def tree_depth(horizon: int) -> int:
    """Number of tree levels L = ⌈log₂(T + 1)⌉ = ⌊log₂ T⌋ + 1: nodes holding any one element."""
    return int(horizon).bit_length()


def continual_cost(
    account: Chargeable,
    sigma: float | None,
    cost: ZCDP | GDP | None,
    sensitivity: float,
    compositions: Fraction,
    entries: int | None = None,
) -> tuple[float, ZCDP | GDP]:
    """Noise σ and charge for a stream whose element enters Gaussian nodes of total weight ``compositions``.

    zCDP: ρ = compositions · Δ²/(2σ²). From ``sigma``: the exact ρ rounded up to 15
    digits. From ``cost`` (or, if neither is given, all of ``account.remaining``): σ
    is the smallest float meeting the cost, which is charged exactly.

    GDP (a gdp account; needs ``entries``, the m entries of one node, and an integer
    ``compositions`` k of nodes of equal sensitivity): μ² = k·μ′², μ′ of one node's
    float-safe discrete noise (:func:`mechanisms.lattice.gdp_mu_squared`); nodes
    compose as √(Σμᵢ²) (Dong, Roth & Su 2022, Cor. 3.3). From a GDP ``cost`` σ is
    calibrated by :func:`mechanisms.lattice.gdp_sigma`.
    """
    check_account(account, ("zcdp", "gdp") if entries is not None else ("zcdp",),
                  "Gaussian continual-release noise (zCDP or GDP cost)")
    if account.currency == "gdp":
        return _gdp_cost(account, sigma, cost, sensitivity, compositions, check_int("entries", entries, 1))
    if sigma is not None and cost is not None:
        raise ValueError("give at most one of sigma (node noise std > 0) and cost (a ZCDP for the whole horizon)")
    if sigma is not None:
        sigma = check_positive("sigma", sigma)
        return sigma, ZCDP(round_up(gaussian_rho_exact(sigma, sensitivity, compositions)))
    spend = _remaining(account) if cost is None else cost
    if cost is None and (not isinstance(spend, ZCDP) or spend.rho <= 0):
        raise ValueError(f"account has no remaining zCDP budget to spend (remaining {spend}); give sigma or cost")
    if not isinstance(spend, ZCDP):
        raise TypeError(f"cost must be an accounting.ZCDP, got {type(spend).__name__}")
    if spend.delta != 0 or spend.rho <= 0:
        raise ValueError(f"cost must be ZCDP(rho > 0, delta=0) for Gaussian noise, got {spend}")
    return gaussian_sigma(spend.rho, sensitivity, compositions), spend


def _remaining(account: Chargeable) -> Cost:
    """All that is left in ``account``, the cost of a mechanism told to spend it (neither sigma nor cost given)."""
    if not isinstance(account, Budgeted):
        raise TypeError(f"account must show its remaining budget to spend all of it, got {type(account).__name__}; "
                        "give sigma or cost")
    return account.remaining


def _gdp_cost(account: Chargeable, sigma: float | None, cost: object, sensitivity: float, compositions: Fraction,
              entries: int) -> tuple[float, GDP]:
    """:func:`continual_cost` for a gdp account."""
    if sigma is not None and cost is not None:
        raise ValueError("give at most one of sigma (node noise std > 0) and cost (a GDP for the whole horizon)")
    if sigma is not None:
        sigma = check_positive("sigma", sigma)
        return sigma, GDP.from_mu_squared(compositions * gdp_mu_squared(sigma, sensitivity, entries))
    spend = _remaining(account) if cost is None else cost
    if not isinstance(spend, GDP):
        raise TypeError(f"cost must be an accounting.GDP for a gdp account, got {type(spend).__name__}")
    if spend.mu_squared <= 0:
        raise ValueError(f"cost must be GDP(mu > 0) for Gaussian noise, got {spend}")
    return gdp_sigma(spend.mu_squared, sensitivity, entries, compositions), spend


class NodeNoise:
    """Float-safe node noise of a continual release, built once the horizon is charged (paper §J.3).

    Each node is rounded to the power-of-two grid of :class:`mechanisms.lattice.GaussianLattice`
    and gets discrete Gaussian noise there: i.i.d. N_ℤ(0, S)·g per entry for vectors,
    g·(Z' + Z'ᵀ)/2 for matrices. The module docstring's Rényi argument holds as is:
    the upper triangle of n + (Z' + Z'ᵀ)/2 is post-processing of the two independent
    discrete releases n_ij + Z'_ij and n_ij + Z'_ji (each α·D_ij²/(2σ²) by Canonne,
    Kamath & Steinke 2020, Thm 4), so a node is ‖D‖_F²/(2σ²)-zCDP for the rounded
    difference D, whose Frobenius norm is at most Δ + g·d (``docs/float-safe-noise.md``).
    Draws are made in blocks (:class:`mechanisms.lattice.NoiseStream`), all covered
    by the one charge.
    """

    def __init__(self, rng: np.random.Generator, sigma: float, sensitivity: float, shape: tuple[int, ...],
                 rows: int = 1, nodes: int = 2**16, node_bound: float = math.inf) -> None:
        self.shape, self.sigma = shape, sigma
        self.entries = int(np.prod(shape))
        # ``rows`` nodes moved by one element together (factorization: all T rows of Cx) round jointly.
        self.lattice = GaussianLattice(sigma, sensitivity, self.entries * rows)
        self.grid = self.lattice.grid
        self._inverse = 1.0 / self.grid  # a power of two: x·(1/g) = x/g exactly
        # Nodes whose entries are at most ``node_bound`` (a sum of checked elements) cannot overflow
        # node/g: vouched once here, :meth:`noisy` then skips its per-node finiteness check.
        self._units_vouched = node_bound * self._inverse < 2.0**1000
        # Blocks of ~2^16 draws (the sampler's per-call cost amortised), never more than ``nodes`` nodes' worth.
        per_block = max(1, min(int(nodes), 2**16 // self.entries))
        self.stream = NoiseStream(self.lattice, rng, block=self.entries * per_block)
        self.symmetric = len(shape) == 2
        self._ready = np.zeros((0, *shape))
        self._at = 0

    def noise(self, count: int) -> FloatArray:
        """``count`` node noises stacked on a new first axis (exact grid multiples), scaled a block at a time."""
        if self._at + count > self._ready.shape[0]:
            nodes = max(count, self.stream.block // self.entries)
            fresh = self.lattice.scale(self.stream.take(nodes * self.entries), (nodes, *self.shape), self.symmetric)
            if not math.isfinite(float(fresh.sum())):  # checked in bulk, a block at a time: releases are vouched
                raise ValueError(f"node noise is not finite (sigma={self.sigma!r}, grid={self.grid!r})")
            self._ready, self._at = np.concatenate((self._ready[self._at:], fresh)), 0
        out: FloatArray = self._ready[self._at: self._at + count]
        self._at += count
        return out

    def noisy(self, node: FloatArray, out: FloatArray | None = None) -> FloatArray:
        """fl(g·rint(node/g) + node noise): one float-safe noisy node (written into ``out`` if given)."""
        noisy: FloatArray = np.multiply(node, self._inverse, out=out)
        np.rint(noisy, out=noisy)
        if not self._units_vouched and not math.isfinite(float(noisy.sum())):
            raise ValueError(f"x is too large for the noise grid {self.grid!r} (|x|/grid overflows a float)")
        noisy *= self.grid  # in place: the same products, one array fewer
        at = self._at
        if at < self._ready.shape[0]:
            self._at = at + 1
            noisy += self._ready[at]
        else:
            noisy += self.noise(1)[0]
        return noisy


class ContinualRelease(Mechanism, abc.ABC):
    """What the continual-release mechanisms share: element checks, the one up-front charge, ``noise_variance``.

    The constructor is shared: it validates the stream and the generator
    (:meth:`_open_stream`), asks the subclass's ``_plan()`` for the total weight k of
    Gaussian releases one element enters (ρ = k·Δ²/(2σ²)), calibrates σ and charges
    the whole horizon before any noise is drawn (:meth:`_charge_horizon`, which
    starts at t = 0), and only then calls the subclass's ``_start()`` to draw or
    allocate its noise. A subclass also implements ``append`` and ``_noise_weight(t)``
    (the noise variance of the t-th release in units of σ²). Parameters: see the
    subclasses.
    """

    #: Name recorded with the charge.
    mechanism_name = "ContinualRelease"
    #: The stream position, advanced by ``append`` (every other public attribute is read-only).
    _MUTABLE = ("t",)

    def __init__(
        self,
        account: Chargeable,
        horizon: int,
        shape: object,
        sensitivity: float,
        rng: np.random.Generator,
        *,
        sigma: float | None = None,
        cost: ZCDP | None = None,
        relation: str = "replace_one",
        psd: bool = False,
        invalid: str = "raise",
    ) -> None:
        self._open_stream(horizon, shape, sensitivity, rng, relation, psd, invalid)
        # From the public T and shape: a state that memory cannot hold is refused before the charge.
        check_state_memory(self.shape, self.horizon, self._state_bytes, f"the {type(self).__name__}'s state")
        compositions, detail, sigma_label = self._plan()
        self._charge_horizon(account, sigma, cost, compositions, detail, sigma_label)
        self._start()

    def _open_stream(self, horizon: int, shape: object, sensitivity: float, rng: np.random.Generator,
                     relation: str, psd: bool, invalid: str = "raise") -> None:
        self._elements = StreamElements(horizon, shape, sensitivity, relation, psd, invalid)
        self.invalid = invalid
        self.rng = check_generator(rng)
        self.horizon = self._elements.horizon
        self.shape = self._elements.shape
        self.sensitivity = self._elements.sensitivity
        self.relation = relation
        self.element_bound = self._elements.element_bound
        self.charged_sensitivity = self._elements.charged_sensitivity

    def _charge_horizon(self, account: Chargeable, sigma: float | None, cost: ZCDP | None, compositions: Fraction,
                        detail: str, sigma_label: str = "sigma") -> None:
        sensitivity, weight, entries = self.charged_sensitivity, compositions, self._gdp_entries()
        if getattr(account, "currency", None) == "gdp":
            sensitivity, weight, entries = self._gdp_terms(compositions)
        self.sigma, self.cost = continual_cost(account, sigma, cost, sensitivity, weight, entries)
        self.receipt = self._charge(
            self.cost,
            releases=self.horizon,
            account=account,
            mechanism=self.mechanism_name,
            relation=self.relation,
            partition=None,
            note=(
                f"horizon T={self.horizon}, {detail}, shape={self.shape}, {sigma_label}={self.sigma!r}, "
                f"sensitivity={self.sensitivity!r}" + (" (psd)" if self._elements.psd else "")
            ),
        )
        self.account = account
        self.t = 0

    def _state_bytes(self, horizon: int) -> int:  # _start's 2L nodes and a node of noise (overridden)
        return 8 * math.prod(self.shape) * (2 * tree_depth(horizon) + 2)

    def _gdp_entries(self) -> int | None:
        """Entries m of one node when every node an element enters moves by ≤ Δ (GDP-capable), else None."""
        return None

    def _gdp_terms(self, compositions: Fraction) -> tuple[float, Fraction, int | None]:
        """(sensitivity, number k of equal-sensitivity releases, entries of one) of the GDP charge μ² = k·μ′².

        Default: the k = ``compositions`` nodes an element enters, each moved by ≤ Δ.
        """
        return self.charged_sensitivity, compositions, self._gdp_entries()

    @abc.abstractmethod
    def _plan(self) -> tuple[Fraction, str, str]:
        """Before the charge: the weight k of the charge, the detail and the σ label for its note."""

    @abc.abstractmethod
    def _start(self) -> None:
        """After the charge: draw or allocate the noise state for t = 0."""

    @abc.abstractmethod
    def _noise_weight(self, t: int) -> float:
        """Variance of the t-th release's noise (diagonal entries) in units of σ²."""

    @abc.abstractmethod
    def append(self, x: npt.ArrayLike) -> Release:
        """Add the next element and release the noisy prefix sum."""

    def _node_noise(self, sensitivity: float | None = None, rows: int = 1) -> NodeNoise:
        """The float-safe node noise for the current σ, built at first use (after the charge).

        ``sensitivity`` of one node (default the charged Δ) and the ``rows`` of nodes
        one element moves at once set the rounding allowance (:class:`NodeNoise`).
        """
        noise = getattr(self, "_nodes", None)
        if noise is None or noise.sigma != self.sigma:
            node_sensitivity = self.charged_sensitivity if sensitivity is None else sensitivity
            noise = self._nodes = NodeNoise(self.rng, self.sigma, node_sensitivity, self.shape, rows, self.horizon,
                                            self._node_bound())
        return noise

    def _node_bound(self) -> float:
        """A bound on every entry of a node (for :class:`NodeNoise`'s overflow check); ∞ unless a subclass knows one."""
        return math.inf

    def noise_variance(self, t: int) -> float:
        """Per-entry (diagonal) variance of the noise in the t-th release, σ²·(weight at t); off-diagonal: half."""
        return self.sigma**2 * self._noise_weight(check_int("t", t, 1, self.horizon))


class BinaryTreeMechanism(ContinualRelease):
    """Continual release of noisy prefix sums S_t = x_1 + … + x_t through a binary tree (paper §J.3).

    Neighbouring relation and sensitivity: one element x_s changes by at most
    ``sensitivity`` Δ (L2 norm for vectors, Frobenius for symmetric matrices) under
    ``relation``. The whole horizon costs ρ = L·Δ²/(2σ²) zCDP, L = ⌈log₂(T + 1)⌉,
    charged once at construction before any noise is drawn (derivation, including
    the symmetrised matrix noise, in the module docstring).

    Memory O(L·d²): only the partial sums along the current binary counter (one
    exact and one noisy node per level). Work per append O(L·d²), plus an O(d³)
    eigenvalue check with ``psd=True`` — skipped for an :class:`OuterProduct` element
    (w·x xᵀ formed by the mechanism, PSD by construction).

    Parameters
    ----------
    account : accounting.Account
        zCDP account charged once for the whole horizon, or a gdp account: then the
        charge is GDP with μ² = L·μ′² (μ′ of one node's float-safe discrete noise,
        :func:`mechanisms.lattice.gdp_mu_squared`) and ``cost`` is a GDP.
    horizon : int
        Number T ≥ 1 of elements.
    shape : tuple
        ``(d,)`` vectors or ``(d, d)`` symmetric matrices.
    sensitivity : float
        Δ > 0 as above.
    rng : numpy.random.Generator
        Source of the node noise.
    sigma : float, optional
        Node noise std (per entry for vectors, diagonal entries for matrices).
    cost : accounting.ZCDP, optional
        Cost of the whole horizon; σ is then calibrated to it, rounded up. If
        neither ``sigma`` nor ``cost`` is given, all of ``account.remaining`` is spent.
    relation : {"replace_one", "add_remove"}
        Neighbouring relation under which ``sensitivity`` holds.
    psd : bool
        Matrix elements are positive semidefinite (e.g. x xᵀ): admits elements with
        ‖x‖_F ≤ Δ/√2 under replace-one instead of Δ/2.
    invalid : {"raise", "clip"}
        An element whose norm exceeds ``element_bound`` (or that is not finite, symmetric,
        PSD as declared): ``"raise"`` (default) refuses it after the horizon's charge, which
        stays spent; ``"clip"`` scales it to the bound (non-finite entries to 0, a matrix
        symmetrised and made PSD) before its noise, so the charged guarantee holds for every
        input (:mod:`mechanisms.stream_elements`, "Clipping instead of refusing").

    Attributes
    ----------
    sigma, depth, t, horizon, receipt, cost, element_bound, invalid
    charged_sensitivity : float
        The Δ the charge pays for: Δ·(1 + 2η) (float slack), times the PSD factor with ``psd``.

    Raises
    ------
    accounting.BudgetExceeded
        At construction, if the account cannot pay; no noise is drawn.

    Examples
    --------
    The norm bound is Δ/2 under replace-one (a replaced element x_s' may point the other
    way: ‖x_s − x_s'‖ ≤ ‖x_s‖ + ‖x_s'‖), so a tree of sensitivity 2 takes vectors of norm
    ≤ 1. The whole horizon is charged at construction; with ``invalid="clip"`` an element
    of the wrong norm is scaled onto the bound before its noise instead of being refused
    after the charge (which would leave the budget spent and the stream stuck):

    >>> import numpy as np
    >>> from accounting import Ledger, ZCDP
    >>> from mechanisms import BinaryTreeMechanism
    >>> tree = BinaryTreeMechanism(Ledger(ZCDP(1)).root, horizon=100, shape=(2,), sensitivity=2.0,
    ...                            rng=np.random.default_rng(0), cost=ZCDP(0.5), invalid="clip")
    >>> tree.element_bound  # replace-one: Δ/2
    1.0
    >>> release = tree.append(np.array([3.0, 4.0]))  # norm 5: released as [0.6, 0.8] plus noise
    >>> tree.t, release.receipt is tree.receipt
    (1, True)
    """

    mechanism_name = "BinaryTreeMechanism"

    def _plan(self) -> tuple[Fraction, str, str]:
        """An element enters L = ⌈log₂(T + 1)⌉ nodes: ρ = L·Δ²/(2σ²)."""
        self.depth = tree_depth(self.horizon)
        return Fraction(self.depth), f"depth L={self.depth}", "node sigma"

    def _gdp_entries(self) -> int:
        """Each of the L nodes an element enters moves by ≤ Δ: μ² = L·μ′² with m = d (or d²) entries."""
        return int(np.prod(self.shape))

    def _start(self) -> None:
        # Exact and noisy nodes in one array, emptied together. No attribute may view into it: a
        # checkpoint saves each array attribute on its own (dpglm.service.walker), so a view would
        # come back as a separate copy that emptying _levels no longer reaches.
        self._levels = np.zeros((2, self.depth, *self.shape))
        self._node_noise()  # after the charge; it draws nothing until the first node

    def _noise_weight(self, t: int) -> float:
        """The t-th release sums popcount(t) nodes: variance σ²·popcount(t)."""
        return float(bin(t).count("1"))

    def append(self, x: npt.ArrayLike, weight: float | None = None) -> Release:
        """Add element x_{t+1} and release the noisy prefix sum S_{t+1} + noise of popcount(t+1) nodes.

        ``append(x, weight)`` (``psd=True``): x is a vector and the element is ``weight·x xᵀ``,
        formed and checked here as for ``append(OuterProduct(x, weight))``, without the
        intermediate object (the policies' V and H leaves, every round).

        Binary counter (Chan, Shi & Song 2011, Alg. 2): at time t with lowest set bit
        i, node i becomes the sum of nodes 0..i−1 plus x_t, with fresh noise; the
        nodes below i are emptied. Nonzero nodes are exactly the set bits of t, so
        the release is the sum of the noisy nodes.

        Raises
        ------
        ValueError
            If the horizon is exhausted or ``x`` is malformed (see ``StreamElements.check``).
        """
        t = self.t
        level = ((t + 1) & -(t + 1)).bit_length() - 1
        exact, noisy = self._levels
        slot = exact[min(level, self.depth - 1)]  # empty: the bit of t at this level is 0 (past the horizon: unused)
        element = self._elements.check(x, t) if weight is None else self._elements.outer(x, weight, t, slot)
        self.__dict__["t"] = t + 1  # run state (``_MUTABLE``): no read-only guard to consult
        if level:
            node = np.add.reduce(exact[:level], axis=0)  # = exact[:level].sum(axis=0)
            node += element  # in place: the same sums as exact[:level].sum(axis=0) + element
            self._levels[:, :level] = 0.0
            slot[...] = node
        elif element is not slot:  # an odd t: the node is the element alone (formed in its slot by outer)
            slot[...] = element
        self._nodes.noisy(slot, noisy[level])
        # Vouched (Mechanism._release): a sum of noisy nodes, each a checked finite element sum rounded to
        # the grid plus node noise checked finite a block at a time (NodeNoise.noise); no per-value check.
        return self._release(np.add.reduce(noisy), self.receipt, vouched=True)  # = noisy.sum(axis=0)

    def _node_bound(self) -> float:
        """A node sums at most T checked elements, each entry at most the accepted norm (twice: float slack)."""
        return 2.0 * self.horizon * self._elements.accepted_norm
