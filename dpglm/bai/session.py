"""A Top Two simulation that can stop and continue: ``engine.start(...)``, ``advance``, ``result``.

:meth:`dpglm.bai.top_two.TopTwoEngine.run` is ``start(...).advance().result()``: the
same generators drawn in the same order, so the same numbers. A *block* is one pass
of the lockstep loop: every active run plans its pulls up to its next refresh
(:mod:`dpglm.bai.block_engine`), draws their Binomial rewards, feeds its estimator,
then stops or is cut. Between two blocks a session with one run charging a journal
ledger can be checkpointed and restored bit-identically (docs/service.md, "DP-TT").
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from accounting import Ledger
from accounting.validation import check_int

if TYPE_CHECKING:
    from dpglm.bai.top_two import TopTwoEngine

__all__ = ["BAIResult", "TopTwoSession"]


@dataclass
class BAIResult:
    """Outcome of ``n_runs`` independent runs.

    ``stopping_times[r]`` is τ (or ``max_steps`` if the run was cut, then
    ``stopped[r]`` is False); ``recommendations[r]`` the recommended arm (for a
    cut Top Two run, the empirical best at the cut; −1 for a cut DP-SE run);
    ``ledgers`` the per-run privacy ledgers (empty for non-private runs).
    ``completed_pulls[r]`` (Top Two engines; None otherwise) counts only the pulls behind
    released batches at τ, the way the AdaP-TT authors' code reports τ (``counts.sum()``);
    ``stopping_times`` counts every pull made.
    """

    stopping_times: np.ndarray
    recommendations: np.ndarray
    stopped: np.ndarray
    best_arm: int
    ledgers: list[Ledger] = field(default_factory=list)
    completed_pulls: np.ndarray | None = None

    @property
    def errors(self) -> int:
        """Runs that stopped and recommended a wrong arm."""
        return int(np.sum(self.stopped & (self.recommendations != self.best_arm)))


@dataclass
class _Runs:
    """The engine's per-run state, arrays indexed ``[run]`` or ``[run, arm]``."""

    pulls: np.ndarray  # N_{r,a}
    leader_pulls: np.ndarray  # N^B_{r,a}: pulls of a in rounds a led
    leader_rounds: np.ndarray  # L_{r,a}: rounds a led
    beta_credit: np.ndarray  # S_{r,a}: sum of the leader share β over the rounds a led (β·L for a fixed β)
    t: np.ndarray  # steps so far
    tau: np.ndarray  # stopping time (max_steps until stopped)
    recommendation: np.ndarray
    stopped: np.ndarray
    leader: np.ndarray  # sampling leader B
    best: np.ndarray  # empirical best ã: stopping and recommendation
    completed: np.ndarray  # pulls behind released batches at τ

    @classmethod
    def start(cls, n_runs: int, n_arms: int, max_steps: int) -> _Runs:
        """Every arm pulled once: N = 1, t = K."""
        zeros = np.zeros((n_runs, n_arms), dtype=np.int64)
        return cls(np.ones((n_runs, n_arms), dtype=np.int64), zeros, zeros.copy(), np.zeros((n_runs, n_arms)),
                   np.full(n_runs, n_arms, dtype=np.int64), np.full(n_runs, max_steps, dtype=np.int64),
                   np.full(n_runs, -1, dtype=np.int64), np.zeros(n_runs, dtype=bool),
                   np.zeros(n_runs, dtype=np.int64), np.zeros(n_runs, dtype=np.int64),
                   np.full(n_runs, max_steps, dtype=np.int64))


def check_session_ledger(ledger: object, n_runs: int, engine: TopTwoEngine) -> Ledger | None:
    """``ledger`` of :meth:`TopTwoEngine.start`: None, or a Ledger for the one run of a noisy engine."""
    if ledger is None:
        return None
    if not isinstance(ledger, Ledger):
        raise TypeError(f"ledger must be an accounting.Ledger or None, got {type(ledger).__name__}")
    if not (engine.private and np.isfinite(engine.epsilon)):
        raise ValueError("ledger must be None for an engine that draws no noise (EB-TCI, epsilon = inf)")
    if n_runs != 1:
        raise ValueError(f"ledger= holds the budget of one run's users; give n_runs=1, got n_runs={n_runs}")
    return ledger


class TopTwoSession:
    """``n_runs`` runs of a Top Two engine in lockstep, advanced block by block (module docstring).

    Made by :meth:`dpglm.bai.top_two.TopTwoEngine.start`; read :attr:`done`,
    :attr:`blocks`, :meth:`result`. With ``ledger=`` (one run, a pure-ε
    :class:`accounting.Ledger`) the run's batches charge that ledger; with a journal
    under it, :meth:`checkpoint` writes the session (estimator, generators, counts; the
    ledger by reference) and stops it, and :meth:`restore` continues it on the reopened
    ledger (:mod:`dpglm.service.checkpoint`; docs/service.md, "DP-TT").
    """

    _RELEASES = ("advance",)  # what a checkpoint stops: nothing is released after it

    def __init__(self, engine: TopTwoEngine, n_runs: int, rng: np.random.Generator, max_steps: int,
                 ledger: Ledger | None) -> None:
        self.engine, self.max_steps, self.ledger = engine, max_steps, ledger
        self.blocks = 0
        self._pending: str | None = None  # "block" while a block runs: a failed one leaves it set
        self.env_rng, noise_rng, self.tie_rng = rng.spawn(3)
        n_arms = engine.mu.size
        self.est = engine._estimator(n_runs, n_arms, noise_rng, ledger)
        engine._match_threshold_to_noise(self.est)
        self.runs = _Runs.start(n_runs, n_arms, max_steps)
        first = self.env_rng.binomial(1, np.broadcast_to(engine.mu, (n_runs, n_arms))).astype(float)
        self.est.observe(self.runs.pulls.copy(), first)
        everyone = np.arange(n_runs)
        engine._new_leaders(self.est, everyone, self.runs, self.tie_rng)
        self.active = engine._check(self.est, everyone, self.runs)

    @property
    def done(self) -> bool:
        """Every run stopped or was cut at ``max_steps``."""
        return not self.active.size

    def advance(self, blocks: int | None = None) -> TopTwoSession:
        """Play at most ``blocks`` lockstep blocks (None: until :attr:`done`); returns the session."""
        limit = None if blocks is None else check_int("blocks", blocks, 1)
        if self._pending is not None:
            raise RuntimeError("a block of this session failed part-way (e.g. a refused charge); it cannot continue")
        played = 0
        while self.active.size and (limit is None or played < limit):
            self._pending = "block"
            self._block()
            self._pending = None
            self.blocks += 1
            played += 1
        return self

    def _block(self) -> None:
        engine, est, runs, active = self.engine, self.est, self.runs, self.active
        block = engine._plan_block(est, runs, active, self.max_steps)
        engine._advance(runs, active, block)
        refreshed = est.observe(*engine._completed_batches(est, runs, active, self.env_rng))
        changed = np.arange(runs.t.size)[refreshed.any(axis=1)]
        done = np.array([], dtype=np.int64)
        if changed.size:
            engine._new_leaders(est, changed, runs, self.tie_rng)
            done = np.setdiff1d(changed, engine._check(est, changed, runs))
        cut = active[runs.t[active] >= self.max_steps]
        runs.recommendation[cut] = runs.best[cut]  # what the run would recommend if it stopped now
        self.active = np.setdiff1d(active, np.union1d(done, cut))

    def result(self) -> BAIResult:
        """The runs' outcome; refused until :attr:`done`."""
        if not self.done:
            raise RuntimeError(f"{self.active.size} runs are still going; advance() until done")
        runs = self.runs
        return BAIResult(runs.tau, runs.recommendation, runs.stopped, int(np.argmax(self.engine.mu)),
                         self.est.ledgers, runs.completed)

    def checkpoint(self, path: str | os.PathLike[str]) -> str:
        """Write the session to ``path``, journal its clean stop and stop it; the checkpoint's id.

        Only a session started with ``ledger=`` on a journal (or one drawing no noise):
        runs charging in-memory ledgers would get their budget again (docs/service.md).
        """
        from dpglm.service.checkpoint import CheckpointError, checkpoint_policy

        if self.ledger is None and self.est.ledgers:
            raise CheckpointError(f"checkpoint {os.fspath(path)}: the runs charge in-memory ledgers; start the "
                                  "session with n_runs=1, ledger=Ledger(PureDP(eps), journal=PATH)")
        return checkpoint_policy(self, path)

    @classmethod
    def restore(cls, path: str | os.PathLike[str], *, ledger: Any = None) -> TopTwoSession:
        """The session checkpointed at ``path``, continued on ``ledger`` (reopened on the same journal).

        Refused as a policy's restore (:mod:`dpglm.service.checkpoint`): another journal,
        no clean stop (a crash), a checkpoint restored before, or an older one.
        """
        from dpglm.service.checkpoint import restore_policy

        session: TopTwoSession = restore_policy(path, ledger, cls)
        return session
