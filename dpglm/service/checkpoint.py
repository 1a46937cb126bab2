"""``policy.checkpoint(path)`` and ``Policy.restore(path, ledger=...)`` (issue 24; docs/service.md).

A checkpoint is ONE ``.npz`` file, read back with ``allow_pickle=False``: the policy's
arrays, and a JSON document (stored as bytes) with the rest of its state
(:mod:`dpglm.service.walker`), the journal id and seq of its ledger (not the ledger), a
random checkpoint id and a SHA-256 over the JSON and every array. The file's own hash is
evidence against accidents only (anyone who can write the file can recompute it); what
binds a file to its one restore is the journal: the ``"stopped"`` row holds the id, the
lineage and the SHA-256, and a restore is granted only to the file that row names. The
file holds raw private state (Gram matrices, refit rows, batch data): protect it like the
data.

The rules (each enforced inside one journal transaction, so two processes racing to
restore the same checkpoint cannot both succeed):

- ``checkpoint`` is a clean stop. It refuses a round in progress (``choose`` without its
  ``observe``; a DP-TT block that failed part-way), writes the file (temp file, fsync,
  rename), then appends a ``"stopped"`` row naming the checkpoint to the journal, and
  only then stops everything the file holds that can release: every policy in the saved
  state (the policy itself and, e.g., an anytime policy's current epoch) refuses its
  ``choose``/``observe`` (a DP-TT session its ``advance``: the methods named by
  ``_RELEASES``), and every mechanism in it refuses to charge or release
  (:meth:`mechanisms.base.Mechanism.stop`). Their next draws are the restored copy's
  noise, so nothing saved releases again outside the restore.
- The state may hold one ledger only, the policy's: another ledger met in it (an
  in-memory ledger per DP-TT run, say) is refused, since a restore would put the
  policy's ledger in its place and the budget it holds would be granted again.
- Checkpoints of one policy and of its restored continuations share a *lineage* id
  (made at its first checkpoint, saved in its state); the rules below compare rows of
  the same lineage only, so several policies may share one journal.
- ``restore`` refuses a checkpoint bound to another journal id; one with no
  ``"stopped"`` row (a crash between the file and the row, or a file from an older
  release); one whose SHA-256 or lineage is not what the journal's ``"stopped"`` row for
  its id says (an edited copy, its digest recomputed); one already restored (a
  ``"restored"`` row for its id, whatever its lineage: one restore per checkpoint); and
  one older than a checkpoint that was stopped or restored since. Otherwise it appends a
  ``"restored"`` row and rebuilds the policy on the given ledger: its next actions are
  bit-identical to the uninterrupted run's.
- After a crash, restore is REFUSED (the issue allows it): a tree's releases after
  the checkpoint wrote no journal row (the tree was paid up front), so which release
  positions a fresh stream would repeat, and what to pay again for them, cannot be read
  from the journal. The operator starts a new policy on what the ledger has left.

A policy without a ledger (non-private, e.g. :class:`~dpglm.policies.RSGLinUCB`) has no
journal to bind to: its checkpoint restores with ``ledger=None``, any number of times.
A private policy whose ledger is in memory cannot be checkpointed (its budget would
be granted again by the next process).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import uuid
import zipfile
from typing import Any

import numpy as np

from dpglm.service.walker import StateError, decode, encode

__all__ = ["FORMAT", "CheckpointError", "checkpoint_policy", "restore_policy"]

FORMAT = "dpglm-checkpoint-1"
_HEADER = "__checkpoint__"


class CheckpointError(ValueError):
    """A checkpoint refused (one line: the path and the rule)."""


def _digest(document: dict[str, Any], arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256(json.dumps(document, sort_keys=True).encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _ledger_of(policy: Any) -> Any:
    """The Ledger the policy charges (that of its Account if it was given one), or None."""
    from accounting import Account, Ledger

    ledger = getattr(policy, "ledger", None)
    if isinstance(ledger, Account):
        ledger = ledger._ledger
    return ledger if isinstance(ledger, Ledger) else None


_STOPPED = "this policy was stopped by checkpoint(); continue with Policy.restore(path, ledger=...)"


def _refuse_stopped(*_: Any, **__: Any) -> Any:
    raise RuntimeError(_STOPPED)


def checkpoint_policy(policy: Any, path: str | os.PathLike[str]) -> str:
    """Write ``policy`` to ``path``, journal its clean stop, stop it; the checkpoint id."""
    path = os.fspath(path)
    if getattr(policy, "_pending", None) is not None or getattr(policy, "_skipping", False):
        raise CheckpointError(f"checkpoint {path}: a round is in progress (choose without observe, or a block "
                              "that failed part-way); checkpoint between rounds")
    ledger = _ledger_of(policy)
    if ledger is not None and ledger.journal_id is None:
        raise CheckpointError(f"checkpoint {path}: the policy's ledger is in memory; a restored policy would be "
                              "granted its budget again. Give the policy a Ledger(budget, journal=PATH)")
    lineage = getattr(policy, "_checkpoint_lineage", None) or uuid.uuid4().hex  # one per policy, kept by restores
    policy._checkpoint_lineage = lineage
    reached: list[Any] = []
    try:
        tree, arrays = encode(policy, ledger=ledger, reached=reached)
    except StateError as error:
        raise CheckpointError(f"checkpoint {path}: {error}") from None
    document: dict[str, Any] = {
        "format": FORMAT, "checkpoint": uuid.uuid4().hex, "lineage": lineage,
        "class": f"{type(policy).__module__}:{type(policy).__qualname__}",
        "journal_id": None if ledger is None else ledger.journal_id,
        "at_seq": None if ledger is None else ledger.seq, "state": tree,
    }
    document["sha256"] = _digest(document, arrays)
    _write(path, document, arrays)
    if ledger is not None:
        ledger.record_service_row("stopped", lambda rows: {"checkpoint": document["checkpoint"], "lineage": lineage,
                                                           "at_seq": document["at_seq"],
                                                           "sha256": document["sha256"]})
    _stop(reached)
    return str(document["checkpoint"])


def _stop(reached: list[Any]) -> None:
    """Stop every policy, session and mechanism the checkpoint saved: none of them releases again."""
    from dpglm.policies.base import Policy
    from mechanisms.base import Mechanism

    for obj in reached:
        if isinstance(obj, Mechanism):
            obj.stop(_STOPPED)
        elif isinstance(obj, Policy) or hasattr(type(obj), "_RELEASES"):
            for name in getattr(obj, "_RELEASES", ("choose", "observe")):
                setattr(obj, name, _refuse_stopped)


def _write(path: str, document: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    header = np.frombuffer(json.dumps(document).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **{**arrays, _HEADER: header})  # type: ignore[arg-type]
    directory = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(dir=directory, prefix=".checkpoint-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(buffer.getvalue())
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def _read(path: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as error:
        raise CheckpointError(f"checkpoint {path}: not a readable checkpoint ({error})") from None
    header = arrays.pop(_HEADER, None)
    if header is None:
        raise CheckpointError(f"checkpoint {path}: not a dpglm checkpoint (no header)")
    document = json.loads(header.tobytes().decode())
    if document.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {path}: format {document.get('format')!r}, this version reads {FORMAT}")
    stored = document.pop("sha256", None)
    if stored != _digest(document, arrays):
        raise CheckpointError(f"checkpoint {path}: its SHA-256 does not match (damaged or edited)")
    document["sha256"] = stored
    return document, arrays


def _restore_row(path: str, document: dict[str, Any]) -> Any:
    """The check-and-row of a restore, run inside the journal transaction with every service row so far.

    The journal decides (docs/service.md, "Checkpoints and restarts"): the file must be the
    one the ``"stopped"`` row of its id names (same SHA-256, lineage and seq: a copy whose
    lineage was edited and digest recomputed is another file), that id must have no
    ``"restored"`` row under any lineage, and no later checkpoint of its lineage may have
    been stopped or restored.
    """
    ident, at_seq, lineage, digest = document["checkpoint"], document["at_seq"], document["lineage"], document["sha256"]

    def row(rows: list[tuple[int, str, dict[str, Any]]]) -> dict[str, Any]:
        stopped = [(seq, payload) for seq, kind, payload in rows
                   if kind == "stopped" and payload.get("checkpoint") == ident]
        if not stopped:
            raise CheckpointError(f"checkpoint {path}: no clean stop in the journal (a crash after it was written); "
                                  "refused: start a new policy on what the ledger has left (docs/service.md)")
        if len(stopped) > 1 or (stopped[0][1].get("sha256"), stopped[0][1].get("lineage"),
                                stopped[0][1].get("at_seq")) != (digest, lineage, at_seq):
            raise CheckpointError(f"checkpoint {path}: not the file the journal's stopped row {stopped[0][0]} names "
                                  "(its SHA-256 or lineage differ: an edited copy); refused")
        if any(kind == "restored" and payload.get("checkpoint") == ident for _, kind, payload in rows):
            raise CheckpointError(f"checkpoint {path}: already restored once; restoring it again would repeat "
                                  "its noise on new data")
        for _, kind, payload in rows:
            if payload.get("lineage") == lineage and payload.get("checkpoint") != ident \
                    and isinstance(payload.get("at_seq"), int) and payload["at_seq"] >= at_seq:
                raise CheckpointError(f"checkpoint {path}: a later checkpoint of this journal was {kind} "
                                      f"(written at seq {payload['at_seq']} >= {at_seq}); an older one is refused")
        return {"checkpoint": ident, "lineage": lineage, "at_seq": at_seq, "stopped_seq": stopped[0][0]}

    return row


def restore_policy(path: str | os.PathLike[str], ledger: Any = None, expected: type | None = None) -> Any:
    """The policy saved at ``path``, continued on ``ledger`` (see the module docstring for what is refused)."""
    path = os.fspath(path)
    document, arrays = _read(path)
    journal_id = document["journal_id"]
    if journal_id is None:
        if ledger is not None:
            raise CheckpointError(f"checkpoint {path}: the policy had no ledger; restore with ledger=None")
    else:
        if ledger is None:
            raise CheckpointError(f"checkpoint {path}: the policy charged journal {journal_id}; give "
                                  "ledger=Ledger.from_journal(...) on that journal")
        if ledger.journal_id != journal_id:
            raise CheckpointError(f"checkpoint {path}: written against journal {journal_id}, the ledger's journal is "
                                  f"{ledger.journal_id}; refused")
        ledger.record_service_row("restored", _restore_row(path, document))
    policy = decode(document["state"], arrays, ledger)
    if expected is not None and not isinstance(policy, expected):
        raise CheckpointError(f"checkpoint {path}: holds a {type(policy).__name__}, not a {expected.__name__}")
    return policy
