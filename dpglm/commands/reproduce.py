"""``dpglm reproduce EXPERIMENT``: one sub-subcommand per reproduced result.

Each experiment module exposes ``add_arguments(parser)`` and ``run(args)``.
"""

from __future__ import annotations

import argparse
import importlib

#: (experiment, module, one-line help)
EXPERIMENTS: tuple[tuple[str, str, str], ...] = (
    ("table2", "dpglm.experiments.table2", "paper 1, Table 2: probit, d=3, K=20, T=5000"),
    ("fig1", "dpglm.experiments.fig1", "paper 1, Figure 1: regret curves, logistic and probit"),
    ("shuffle", "dpglm.experiments.shuffle", "paper 1, Algorithm 1 (shuffle-DP) on stochastic contexts"),
    ("bai", "dpglm.experiments.bai", "paper 2: stopping time of private best-arm identification vs ε"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    for name, module_name, help_text in EXPERIMENTS:
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(p)
        p.set_defaults(_experiment=module.run)


def run(args: argparse.Namespace) -> int:
    return int(args._experiment(args) or 0)
