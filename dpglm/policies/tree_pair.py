"""The V-tree and the H-tree of the joint-DP bandit charged as one pair: the joint cost, not the sum.

Every round appends one leaf to each tree: ``x xᵀ`` to V on a Criterion I round and
``μ̇(⟨x, θ̂_o⟩)/e · x xᵀ`` to H otherwise, a zero leaf to the other tree
(:meth:`dpglm.policies.rarely_switching.RarelySwitchingBandit.observe`). So a user's
row is in exactly one tree, but under replace-one neighbouring it may be in V in one
world and in H in the other (whether round i explores depends on user i's own arms).
The two trees together are one binary tree over the leaf pairs (V-leaf, H-leaf) with
independent noise on the two halves; one user moves the L nodes its leaf enters, and
each pair-node is the composition of two independent lattice Gaussians, so its GDP μ²
is the sum of the halves' μ′² for the shifts they see (Dong, Roth & Su 2022, Cor. 3.3).
Over the three kinds of neighbour (``docs/joint-dp-privacy.md``, "V and H as one pair"):

* both rows in V: V moves by ≤ Δ_V, H not at all: ``L·μ′_V(Δ_V)²``;
* both rows in H: ``L·μ′_H(Δ_H)²``;
* a move V ↔ H: V moves by ≤ Δ_V/√2 (one PSD leaf, ‖x xᵀ‖_F ≤ 1) and H by ≤ Δ_H/√2:
  ``L·(μ′_V(Δ_V/√2)² + μ′_H(Δ_H/√2)²)`` — about the mean of the other two.

The pair's μ² is the largest of the three, about ``max(μ_V², μ_H²)``: half the sum when
the plan gives the trees equal μ². The ledger records exactly that: each tree charges
its own cost under its own partition key (``"V-tree"``, ``"H-tree"``; the ledger spends
the larger), and the move case's excess over the larger (~10⁻⁷ relative: the lattice's
rounding allowance does not halve with the shift) is charged sequentially, all at
construction, before any noise is drawn.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from accounting import GDP, Chargeable, Cost, Receipt
from mechanisms.lattice import GaussianLattice, gdp_sigma
from mechanisms.tree import BinaryTreeMechanism, StreamElements, tree_depth

__all__ = ["PartitionedTree", "TreePair", "build_tree_pair", "move_mu_sq", "pair_mu_sq"]

_PAIR_MECHANISM = "BinaryTreeMechanism pair (V/H move case)"


class PartitionedTree(BinaryTreeMechanism):
    """A :class:`mechanisms.tree.BinaryTreeMechanism` whose one charge carries a ledger partition key.

    Used only by :func:`build_tree_pair`, whose move-case charge makes the two keys'
    max a valid bound (module docstring); ``partition=None`` is the plain tree.
    """

    def __init__(self, *args: Any, partition: str | None = None, **kwargs: Any) -> None:
        self._partition = partition
        super().__init__(*args, **kwargs)

    def _charge(self, cost: Cost, *, releases: int = 1, account: Chargeable | None = None, **charge: Any) -> Receipt:
        charge["partition"] = self._partition
        return super()._charge(cost, releases=releases, account=account, **charge)


def move_mu_sq(sigma: float, charged_sensitivity: float, d: int, horizon: int) -> Fraction:
    """``L·μ′(Δ/√2)²`` of one tree whose leaf moves out (or in): a PSD leaf of norm ≤ Δ/√2 (module docstring).

    μ′ is the tree's own node lattice (:class:`mechanisms.lattice.GaussianLattice` of σ,
    the charged Δ and d² entries, as its :class:`mechanisms.tree.NodeNoise` builds it)
    evaluated at the shift ``Δ/√2`` rounded up; L the tree depth.
    """
    entries = d * d
    lattice = GaussianLattice(sigma, charged_sensitivity, entries)
    shift = math.nextafter(charged_sensitivity / math.sqrt(2.0), math.inf)
    return tree_depth(horizon) * Fraction(lattice.gdp_mu(shift, entries)) ** 2


def pair_mu_sq(mu_sq_v: Fraction, mu_sq_h: Fraction, move: Fraction) -> Fraction:
    """The pair's GDP μ²: the largest of both-in-V, both-in-H and the move case (module docstring)."""
    return max(mu_sq_v, mu_sq_h, move)


class TreePair:
    """The V-tree and the H-tree, charged as one pair (:func:`build_tree_pair`).

    Attributes
    ----------
    v_tree, h_tree : PartitionedTree
    mu_sq : fractions.Fraction
        The pair's GDP μ² as charged (partition max plus the move-case excess).
    move_mu_sq : fractions.Fraction
        The move case's μ² (both trees' halves).
    """

    def __init__(self, v_tree: PartitionedTree, h_tree: PartitionedTree, move: Fraction) -> None:
        self.v_tree, self.h_tree, self.move_mu_sq = v_tree, h_tree, move
        self.mu_sq = pair_mu_sq(_mu_sq(v_tree.cost), _mu_sq(h_tree.cost), move)


def _mu_sq(cost: object) -> Fraction:
    if not isinstance(cost, GDP):
        raise TypeError(f"a tree pair needs a gdp account, got a {type(cost).__name__} charge")
    return cost.mu_squared


def _planned_move(mu_sq: Fraction, sensitivities: tuple[float, float], d: int, horizon: int) -> Fraction:
    """The move case's μ² if both trees are built with cost ``mu_sq`` (σ calibrated as the tree does)."""
    total = Fraction(0)
    for sensitivity in sensitivities:
        charged = StreamElements(horizon, (d, d), sensitivity, "replace_one", True).charged_sensitivity
        sigma = gdp_sigma(mu_sq, charged, d * d, Fraction(tree_depth(horizon)))
        total += move_mu_sq(sigma, charged, d, horizon)
    return total


def build_tree_pair(account: Any, horizon: int, d: int, sensitivities: tuple[float, float],
                    rng: np.random.Generator, mu_sq: float) -> TreePair:
    """Both trees on ``account`` (a gdp pool) for a joint μ² of at most ``mu_sq``, charged before any noise.

    Each tree gets the same cost c (so ``σ_H/σ_V ≈ Δ_H/Δ_V``), the largest found with
    ``pair μ² ≤ mu_sq``: c = ``mu_sq`` lowered by the move case's relative excess. Both
    draw their node noise from ``rng``, in the order the policy appends.

    Raises
    ------
    accounting.BudgetExceeded
        If the account cannot pay; no noise has been drawn.
    """
    target = Fraction(mu_sq)
    cost = target
    for _ in range(20):
        move = _planned_move(cost, sensitivities, d, horizon)
        if max(cost, move) <= target:
            break
        cost *= target / move * (1 - Fraction(1, 2**40))
    else:  # pragma: no cover - the excess is ~1e-7 relative; one step suffices
        raise RuntimeError(f"could not fit a tree pair into mu^2 = {float(target)}")
    sens_v, sens_h = sensitivities
    v_tree = PartitionedTree(account, horizon, (d, d), sens_v, rng, cost=GDP.from_mu_squared(cost), psd=True,
                             partition="V-tree")
    h_tree = PartitionedTree(account, horizon, (d, d), sens_h, rng, cost=GDP.from_mu_squared(cost), psd=True,
                             partition="H-tree")
    move = sum((move_mu_sq(t.sigma, t.charged_sensitivity, d, horizon) for t in (v_tree, h_tree)), Fraction(0))
    excess = move - max(_mu_sq(v_tree.cost), _mu_sq(h_tree.cost))
    if excess > 0:
        account.charge(GDP.from_mu_squared(excess), mechanism=_PAIR_MECHANISM, relation="replace_one",
                       note=f"move of one user's leaf between the V-tree and the H-tree: pair mu^2 = {float(move)!r} "
                            f"over the partition max (docs/joint-dp-privacy.md, 'V and H as one pair')")
    return TreePair(v_tree, h_tree, move)
