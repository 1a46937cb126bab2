"""The ``dpglm`` command line.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int``; this file only wires them together. Command modules keep
their heavy imports (torch, matplotlib) inside ``run`` so that ``dpglm --help``
stays fast. This is the only file of :mod:`dpglm` that may import :mod:`audits`
(see DESIGN.md, dependency direction).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

#: (subcommand, module, one-line help)
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("demo", "dpglm.commands.demo", "a short private bandit run: regret, criteria, ledger report, plot"),
    ("ledger", "dpglm.commands.ledger", "build and inspect privacy ledgers"),
    ("reproduce", "dpglm.commands.reproduce", "reproduce the papers' tables and figures"),
    ("audit", "audits.command", "empirical privacy audits: certified ε lower bounds"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpglm",
        description="Privacy-accounting-first differentially private bandits.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name, help_text in COMMANDS:
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(sub)
        sub.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
