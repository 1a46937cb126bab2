"""Anytime private policies by the doubling trick (Besson & Kaufmann 2018; issue 24; docs/service.md, section 4).

``JointDPGLMBandit(..., horizon=None, ...)`` builds a :class:`DoublingEpochs`: epoch k
(k = 1, 2, ...) lasts ``first_horizon · 2^(k−1)`` rounds and runs a NEW policy planned for
exactly that horizon (its own tree depth, refit counts), started from scratch: epoch k
sees only its own users.

Budget, ``epoch_budget=``:

- ``"parallel"`` (the default of the policies' ``horizon=None``): epochs that restart from
  scratch see disjoint users, so by parallel composition (McSherry 2009) each may have the
  whole (ε, δ). Epoch k's account is split off the ledger's root under partition key k
  (``root.split({"epoch-k": 1}, partition=k)``, docs/accounting.md, "Parallel
  composition"): it gets ``root.remaining_in(k)``, the whole budget less what the root
  spent sequentially, however much earlier epochs spent, and the epochs compose by max.
  This holds only because epoch k uses no data of earlier epochs: ``build`` gets the
  epoch's horizon (public), its account (funded from public state) and a generator
  spawned from the policy's own (``Generator.spawn``, which reads no data), and the
  policy it returns is new (tested: epoch 2's actions do not depend on epoch 1's data).
- ``"sequential"``: for epochs that warm-start from earlier data (a ``build`` that reads
  an earlier epoch's state), the epochs compose, and a public schedule fixed up front
  splits the budget, epoch k receiving the share ``1/(k(k+1))`` (∝ 1/k², summing to
  exactly 1): epoch 1 ε/2, epoch 2 ε/6, epoch 3 ε/12, ... It is built as a chain of
  exact splits, ``epoch-k : later-k = 1 : k`` of what is left. It is valid for any
  ``build``, and the ledger's total is at most (ε, δ) whatever the number of epochs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from accounting import Account, Ledger
from dpglm._validation import check_generator, check_int
from dpglm.policies.base import Policy

__all__ = ["EPOCH_BUDGETS", "DoublingEpochs", "check_epoch_budget", "epoch_share"]

EpochFactory = Callable[[int, Account, np.random.Generator], Policy]

EPOCH_BUDGETS = ("parallel", "sequential")
"""How epochs share the budget (module docstring): each the whole of it, or a public 1/(k(k+1)) share."""


def check_epoch_budget(epoch_budget: object) -> str:
    """``epoch_budget`` if it is one of :data:`EPOCH_BUDGETS`; a one-line ``ValueError`` naming it otherwise."""
    if not isinstance(epoch_budget, str) or epoch_budget not in EPOCH_BUDGETS:
        raise ValueError(f"epoch_budget must be one of {EPOCH_BUDGETS}, got {epoch_budget!r}")
    return epoch_budget


def epoch_share(k: int) -> float:
    """The public share of the total budget epoch ``k`` (1-based) receives under ``"sequential"``: ``1/(k(k+1))``."""
    return 1.0 / (k * (k + 1))


class DoublingEpochs(Policy):
    """Epoch k: a fresh ``build(first_horizon·2^(k−1), account_k, rng_k)`` policy (module docstring).

    ``epoch_budget="parallel"`` asserts that ``build`` restarts from scratch (uses no data
    of earlier epochs); pass ``"sequential"`` for a ``build`` that warm-starts.
    """

    name = "anytime"

    def __init__(self, build: EpochFactory, d: int, *, ledger: Ledger, first_horizon: int, rng: np.random.Generator,
                 epoch_budget: str, reward_bound: float = 1.0, name: str | None = None) -> None:
        super().__init__(d, reward_bound=reward_bound)
        if not isinstance(ledger, Ledger):
            raise TypeError(f"ledger must be an accounting.Ledger, got {type(ledger).__name__}")
        self.first_horizon = check_int("first_horizon", first_horizon)
        self.epoch_budget = check_epoch_budget(epoch_budget)
        self._rng = check_generator(rng)
        self.ledger, self._build = ledger, build
        self._rest: Account = ledger.root  # "sequential": what later epochs share
        self.epoch = 0
        self.policy: Policy | None = None
        self._left = 0
        self.t = 0
        if name is not None:
            self.name = name

    def _next_epoch(self) -> None:
        k = self.epoch + 1
        if self.epoch_budget == "parallel":  # disjoint users: the whole budget under key k
            account = self.ledger.root.split({f"epoch-{k}": 1}, partition=k)[f"epoch-{k}"]
        else:
            accounts = self._rest.split({f"epoch-{k}": 1, f"later-{k}": k})  # epoch k gets 1/(k(k+1)) of the total
            self._rest, account = accounts[f"later-{k}"], accounts[f"epoch-{k}"]
        horizon = self.first_horizon * 2 ** (k - 1)
        self.policy = self._build(horizon, account, self._rng.spawn(1)[0])
        self.epoch, self._left = k, horizon

    def choose(self, arms: np.ndarray) -> int:
        """The current epoch's choice; a new epoch (a new plan, a new budget) when the last one is used up."""
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
        """Epochs started, how they share the budget, and the ledger's total guarantee."""
        guarantee = self.ledger.guarantee()
        return {"epochs": self.epoch, "epoch_budget": self.epoch_budget, "guarantee_epsilon": float(guarantee.eps),
                "guarantee_delta": float(getattr(guarantee, "delta", 0.0))}
