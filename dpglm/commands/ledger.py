"""``dpglm ledger demo``, ``show JOURNAL``, ``verify JOURNAL`` and ``pgserver``: build, inspect and check ledgers.

``demo`` builds the paper's Algorithm-2 budget (paper §6, "privacy guarantee":
(ε, δ) split into thirds for the binary trees, the switching times and the
optimizer), charges it as the algorithm would and prints the budget report.
``pgserver`` starts a throwaway local PostgreSQL server for trying the PostgreSQL
journal (the tests' own, :mod:`accounting.journal._pgserver`), prints its URL and
runs until Ctrl-C, which stops it and deletes its directory (docs/postgres.md).
``verify`` re-checks every row of a journal from its header and every snapshot
against the replay of the rows before it (:mod:`accounting.journal.verify`):
opening a ledger reads only the last snapshot and the rows after it.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys

from accounting import (
    ZCDP,
    ApproxDP,
    BudgetExceeded,
    JournalBusyError,
    JournalMismatchError,
    Ledger,
)
from accounting.validation import check_int, check_positive, check_probability

SWITCHING_REASON = (
    "paper Lemma 6.1 (proof: Lemma J.5): the exploration indices T_o \\ {t} are "
    "(eps/3, delta/3)-indistinguishable across neighbours differing at t"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="ledger_command", required=True, metavar="ACTION")
    demo = sub.add_parser("demo", help="charge the paper's Algorithm-2 budget and print the report",
                          description="Charge the paper's Algorithm-2 budget as the algorithm would.")
    demo.add_argument("--epsilon", type=float, default=4.0, help="total ε (default 4, paper Table 2)")
    demo.add_argument("--delta", type=float, default=0.02, help="total δ (default 0.02, paper Table 2)")
    demo.add_argument("--horizon", type=int, default=5000, help="horizon T of the tree (default 5000)")
    demo.add_argument("--refits", type=int, default=5,
                      help="DP-SGD refits the optimizer budget is sized for: each costs ρ_max/refits (default 5)")
    demo.add_argument("--journal", default=None,
                      help="journal to write: a SQLite file or a postgresql:// URL (default: in memory)")
    demo.add_argument("--json", action="store_true", help="print the report as JSON")
    show = sub.add_parser("show", help="print the report of a journal (opened read-only)",
                          description="Print the report of a journal, opened read-only.")
    show.add_argument("journal", help="journal written by a Ledger: a SQLite file or a postgresql:// URL")
    show.add_argument("--json", action="store_true", help="print the report as JSON")
    verify = sub.add_parser("verify", help="re-check every row of a journal and every snapshot (read-only)",
                            description="Re-check the whole hash chain of a journal from its header, and that each "
                                        "snapshot row equals the replay of the rows before it. Opening a ledger "
                                        "reads only the last snapshot and the rows after it, so a row damaged "
                                        "before the last snapshot is found here (docs/threat-model.md).")
    verify.add_argument("journal", help="journal written by a Ledger: a SQLite file or a postgresql:// URL")
    sub.add_parser("pgserver", help="start a throwaway local PostgreSQL server to try the journal; Ctrl-C ends it",
                   description="Start a throwaway PostgreSQL server (initdb in a temporary directory, 127.0.0.1, a "
                               "free port, durable settings), print its URL and wait; Ctrl-C (or SIGTERM) stops it "
                               "and deletes everything. For trying journal='postgresql://...', not for budgets that "
                               "matter: docs/postgres.md sets up a real server. Needs the PostgreSQL server binaries "
                               "(Debian: postgresql-15, or DPGLM_PG_BIN).")


def _demo(args: argparse.Namespace) -> int:
    check_positive("--epsilon", args.epsilon)
    check_probability("--delta", args.delta)
    check_int("--horizon", args.horizon)
    check_int("--refits", args.refits)
    log = sys.stderr if args.json else sys.stdout
    with Ledger(ApproxDP(args.epsilon, args.delta), journal=args.journal) as ledger:
        if any(account.usage() for account in ledger.accounts()):
            # a rerun would charge the tree's remaining ZCDP(0) "once for T" and exit 0 (issue 21): refuse
            print(ledger.to_json() if args.json else ledger.report())
            print(f"dpglm ledger demo: journal {args.journal} was already charged by a demo run (spent "
                  f"{ledger.root.spent} of {ledger.budget}); the demo charges a fresh budget: pass a new --journal",
                  file=sys.stderr)
            return 2
        accounts = ledger.split({"tree": 1, "switching": 1, "optimizer": 1},
                                currency={"tree": "zcdp", "optimizer": "zcdp"})
        tree, switching, optimizer = accounts["tree"], accounts["switching"], accounts["optimizer"]
        depth = math.ceil(math.log2(args.horizon + 1))
        # paper Alg. 2 / §J.3: one charge for the whole horizon of both trees (V and H).
        receipt = tree.charge(tree.remaining, mechanism="BinaryTreeMechanism",
                              note=f"V and H prefix sums, horizon T={args.horizon}, depth L={depth}, whole horizon")
        print(f"tree: charged {receipt.charged} once for T={args.horizon}", file=log)
        # paper Lemma 6.1: the switching third is a theorem's cost, not noise.
        receipt = switching.charge_analysis(switching.remaining, reason=SWITCHING_REASON)
        print(f"switching: analysis charge {receipt.charged} ({SWITCHING_REASON})", file=log)
        # paper Alg. 2, lines 5 and 12: each DP-SGD refit charges the optimizer's zCDP filter.
        budget = optimizer.budget
        assert isinstance(budget, ZCDP)  # the split above gave the optimizer a zcdp currency
        per_refit = ZCDP(budget.rho / args.refits)
        for k in range(1, args.refits + 2):
            try:
                receipt = optimizer.charge(per_refit, mechanism="DPSGD", note=f"refit {k}")
            except BudgetExceeded as refused:
                print(f"optimizer: refit {k} refused: {refused}", file=log)
                break
            print(f"optimizer: refit {k} granted {receipt.charged}, remaining {receipt.remaining}", file=log)
        print(file=log)
        print(ledger.to_json() if args.json else ledger.report())
    return 0


def _show(args: argparse.Namespace) -> int:
    """Report a journal opened read-only (SQLite ``mode=ro``): works on a 0444 file or a read-only directory.

    A journal that cannot be trusted (empty, damaged, truncated, rolled back,
    busy, missing) is one line on stderr naming the path, exit status 2.
    """
    try:
        ledger = Ledger.from_journal(args.journal, read_only=True)
    except (JournalMismatchError, JournalBusyError, FileNotFoundError, PermissionError) as error:
        print(f"dpglm ledger show: {error}", file=sys.stderr)
        return 2
    with ledger:
        print(ledger.to_json() if args.json else ledger.report())
    return 0


def _pgserver(args: argparse.Namespace) -> int:
    """Start :class:`accounting.journal._pgserver.TemporaryServer`, print how to use it, wait for Ctrl-C or SIGTERM."""
    from accounting.journal._pgserver import TemporaryServer, find_bin

    if find_bin() is None:
        raise OSError("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: install them (Debian: "
                      "apt-get install postgresql-15) or set DPGLM_PG_BIN to their folder")
    signal.signal(signal.SIGTERM, _interrupt)  # a service manager's stop: the same clean end as Ctrl-C
    # Ctrl-C ends it however it was started: a shell starts background jobs with SIGINT ignored, and Python keeps
    # an ignored SIGINT ignored, so the server would outlive the Ctrl-C (or kill -INT) it promises to answer
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with TemporaryServer() as server:
        url = f"{server.url}?journal=try"
        print(f"PostgreSQL is running (throwaway: Ctrl-C stops it and deletes {server.root})\n"
              f"  server URL:  {server.url}\n"
              f"  a journal:   {url}\n"
              "try it from another shell (the client needs: pip install -e \".[postgres]\"):\n"
              f"  dpglm ledger demo --journal '{url}'\n"
              f"  dpglm ledger show '{url}'\n"
              f"  python -c \"from accounting import Ledger, ZCDP; "
              f"print(Ledger(ZCDP(1), journal='{server.url}?journal=mine').report())\"\n"
              "each client keeps anchors in DPGLM_ANCHOR_DIR (default ~/.local/state/dpglm/anchors); "
              "a real server: docs/postgres.md", flush=True)
        try:
            while True:
                signal.pause()
        except KeyboardInterrupt:
            print("stopping the server and deleting its directory", file=sys.stderr, flush=True)
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _verify(args: argparse.Namespace) -> int:
    """Check the whole journal; one line on stdout if intact, one line on stderr naming what is not (exit 2)."""
    from accounting.journal.verify import verify

    try:
        checked = verify(args.journal)
    except (JournalMismatchError, JournalBusyError, FileNotFoundError, PermissionError) as error:
        print(f"dpglm ledger verify: {error}", file=sys.stderr)
        return 2
    opened = (f"opened from snapshot row {checked.opened_from}" if checked.opened_from
              else "opened without a snapshot")
    print(f"journal {checked.path}: rows 1..{checked.rows} intact, chained from the header; "
          f"{checked.snapshots} snapshot row{'s' if checked.snapshots != 1 else ''}, each the replay of the rows "
          f"before it; {opened}, equal to the replay")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.ledger_command == "demo":
        return _demo(args)
    if args.ledger_command == "pgserver":
        return _pgserver(args)
    if args.ledger_command == "verify":
        return _verify(args)
    return _show(args)
