"""``policy.checkpoint(path)`` and ``Policy.restore(path, ledger=...)`` (issue 24; docs/service.md).

A checkpoint is ONE ``.npz`` file, read back with ``allow_pickle=False``: the policy's
arrays, and a JSON document (stored as bytes) with the rest of its state
(:mod:`dpglm.service.walker`), the journal id and seq of its ledger (not the ledger), a
random checkpoint id and a SHA-256 over the JSON and every array. The hash is evidence
against accidents (a truncated copy, the wrong file), not against an attacker: anyone who
can write the file can recompute it. The file holds raw private state (Gram matrices,
refit rows, batch data): protect it like the data.

The rules (each enforced inside one journal transaction, so two processes racing to
restore the same checkpoint cannot both succeed):

- ``checkpoint`` is a clean stop. It refuses a round in progress (``choose`` without its
  ``observe``; a DP-TT block that failed part-way), writes the file (temp file, fsync,
  rename), then appends a ``"stopped"`` row naming the checkpoint to the journal, and
  only then stops the policy: its ``choose``/``observe`` (a DP-TT session's ``advance``:
  the methods named by ``_RELEASES``) refuse from then on, so nothing is released after
  the checkpoint.
- The state may hold one ledger only, the policy's: another ledger met in it (an
  in-memory ledger per DP-TT run, say) is refused, since a restore would put the
  policy's ledger in its place and the budget it holds would be granted again.
- Checkpoints of one policy and of its restored continuations share a *lineage* id
  (made at its first checkpoint, saved in its state); the rules below compare rows of
  the same lineage only, so several policies may share one journal.
- ``restore`` refuses a checkpoint bound to another journal id; one with no
  ``"stopped"`` row (a crash between the file and the row, or a file from an older
  release); one already restored; and one older than a checkpoint that was stopped or
  restored since. Otherwise it appends a ``"restored"`` row and rebuilds the policy on the
  given ledger: its next actions are bit-identical to the uninterrupted run's.
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


def _refuse_stopped(*_: Any, **__: Any) -> Any:
    raise RuntimeError("this policy was stopped by checkpoint(); continue with Policy.restore(path, ledger=...)")


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
    try:
        tree, arrays = encode(policy, ledger=ledger)
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
    for name in getattr(policy, "_RELEASES", ("choose", "observe")):  # nothing is released after a clean stop
        setattr(policy, name, _refuse_stopped)
    return str(document["checkpoint"])


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
    """The check-and-row of a restore, run inside the journal transaction with every service row so far."""
    ident, at_seq, lineage = document["checkpoint"], document["at_seq"], document["lineage"]

    def row(rows: list[tuple[int, str, dict[str, Any]]]) -> dict[str, Any]:
        for _, kind, payload in rows:
            if payload.get("lineage") != lineage:
                continue  # another policy sharing this journal
            if kind == "restored" and payload.get("checkpoint") == ident:
                raise CheckpointError(f"checkpoint {path}: already restored once; restoring it again would repeat "
                                      "its noise on new data")
            if payload.get("checkpoint") != ident and isinstance(payload.get("at_seq"), int) \
                    and payload["at_seq"] >= at_seq:
                raise CheckpointError(f"checkpoint {path}: a later checkpoint of this journal was {kind} "
                                      f"(written at seq {payload['at_seq']} >= {at_seq}); an older one is refused")
        stopped = [seq for seq, kind, payload in rows if kind == "stopped" and payload.get("checkpoint") == ident]
        if not stopped:
            raise CheckpointError(f"checkpoint {path}: no clean stop in the journal (a crash after it was written); "
                                  "refused: start a new policy on what the ledger has left (docs/service.md)")
        return {"checkpoint": ident, "lineage": lineage, "at_seq": at_seq, "stopped_seq": stopped[0]}

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
