"""Anytime private policies by the doubling trick (Besson & Kaufmann 2018; issue 24; docs/service.md, "Anytime").

``JointDPGLMBandit(..., horizon=None, ...)`` builds a :class:`DoublingEpochs`: epoch k
(k = 1, 2, ...) lasts ``first_horizon · 2^(k−1)`` rounds and runs a NEW policy planned for
exactly that horizon (its own tree depth, refit counts), started from scratch: epoch k
sees only its own users.

Budget. Epochs that restart from scratch see disjoint users, so by parallel composition
each could have the whole (ε, δ). This ledger keys parallel composition per *charge*
(``partition=``), and the joint-DP policy's mechanisms (the trees, paid up front; the
DP-SGD filter) do not take a partition key, so this module does not claim it. It uses
the conservative rule, which holds for warm-started epochs too: the epochs COMPOSE, and a
public schedule fixed up front splits the budget, epoch k receiving the share
``1/(k(k+1))`` (∝ 1/k², summing to exactly 1): epoch 1 ε/2, epoch 2 ε/6, epoch 3 ε/12, ...
It is built as a chain of exact splits, ``epoch-k : later-k = 1 : k`` of what is left.
The ledger's total is then at most (ε, δ) whatever the number of epochs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from accounting import Account, Ledger
from dpglm._validation import check_generator, check_int
from dpglm.policies.base import Policy

__all__ = ["DoublingEpochs", "epoch_share"]

EpochFactory = Callable[[int, Account, np.random.Generator], Policy]


def epoch_share(k: int) -> float:
    """The public share of the total budget epoch ``k`` (1-based) receives: ``1/(k(k+1))``."""
    return 1.0 / (k * (k + 1))


class DoublingEpochs(Policy):
    """Epoch k: a fresh ``build(first_horizon·2^(k−1), account_k, rng_k)`` policy (module docstring)."""

    name = "anytime"

    def __init__(self, build: EpochFactory, d: int, *, ledger: Ledger, first_horizon: int, rng: np.random.Generator,
                 reward_bound: float = 1.0, name: str | None = None) -> None:
        super().__init__(d, reward_bound=reward_bound)
        if not isinstance(ledger, Ledger):
            raise TypeError(f"ledger must be an accounting.Ledger, got {type(ledger).__name__}")
        self.first_horizon = check_int("first_horizon", first_horizon)
        self._rng = check_generator(rng)
        self.ledger, self._build = ledger, build
        self._rest: Account = ledger.root
        self.epoch = 0
        self.policy: Policy | None = None
        self._left = 0
        self.t = 0
        if name is not None:
            self.name = name

    def _next_epoch(self) -> None:
        k = self.epoch + 1
        accounts = self._rest.split({f"epoch-{k}": 1, f"later-{k}": k})  # epoch k gets 1/(k(k+1)) of the total
        self._rest = accounts[f"later-{k}"]
        horizon = self.first_horizon * 2 ** (k - 1)
        self.policy = self._build(horizon, accounts[f"epoch-{k}"], self._rng.spawn(1)[0])
        self.epoch, self._left = k, horizon

    def choose(self, arms: np.ndarray) -> int:
        """The current epoch's choice; a new epoch (a new plan, a new share) when the last one is used up."""
        if self.policy is None or self._left == 0:
            self._next_epoch()
        assert self.policy is not None
        return self.policy.choose(arms)

    def observe(self, reward: float) -> None:
        """The current epoch's observe; the epoch's clock advances."""
        if self.policy is None:
            raise ValueError("choose(arms) must be called before observe(reward)")
        self.policy.observe(reward)
        self._left -= 1
        self.t += 1

    @property
    def _pending(self) -> Any:  # a round in progress (the checkpoint's refusal)
        return None if self.policy is None else getattr(self.policy, "_pending", None)

    def diagnostics(self) -> dict[str, Any]:
        """Epochs started, and the ledger's total guarantee."""
        guarantee = self.ledger.guarantee()
        return {"epochs": self.epoch, "guarantee_epsilon": float(guarantee.eps),
                "guarantee_delta": float(getattr(guarantee, "delta", 0.0))}
