"""The ``dpglm`` command line.

Each leaf command lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int``; this file only wires them together. Only the module of
the command actually invoked is imported, so ``dpglm --help`` stays fast and one
command's heavy dependencies (torch, matplotlib) never load for another. This
is the only file of :mod:`dpglm` that may import :mod:`audits` (docs/design.md,
dependency direction).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

#: A command is a leaf (module path) or a group of named sub-commands.
Command = str | tuple[tuple[str, "Command", str], ...]

REPRODUCE: tuple[tuple[str, Command, str], ...] = (
    ("table2", "dpglm.experiments.table2", "paper 1, Table 2: probit, d=3, K=20, T=5000"),
    ("fig1", "dpglm.experiments.fig1", "paper 1, Figure 1: regret curves, logistic and probit"),
    ("shuffle", "dpglm.experiments.shuffle", "paper 1, Algorithm 1 (shuffle-DP) on stochastic contexts"),
    ("bai", "dpglm.experiments.bai", "paper 2: stopping time of private best-arm identification vs ε"),
)

COMMANDS: tuple[tuple[str, Command, str], ...] = (
    ("demo", "dpglm.commands.demo", "a short private bandit run: regret, criteria, ledger report, plot"),
    ("ledger", "dpglm.commands.ledger", "build and inspect privacy ledgers"),
    ("reproduce", REPRODUCE, "reproduce the papers' tables and figures"),
    ("audit", "audits.command", "empirical privacy audits: certified ε lower bounds"),
)


def _add_commands(
    parser: argparse.ArgumentParser,
    commands: tuple[tuple[str, Command, str], ...],
    path: list[str],
    dest: str,
) -> None:
    """Add ``commands`` under ``parser``; import only the leaf named by ``path``."""
    subparsers = parser.add_subparsers(dest=dest, required=True, metavar=dest.upper(), parser_class=_Parser)
    selected = path[0] if path else None
    for name, target, help_text in commands:
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        if name != selected:
            continue
        if isinstance(target, str):
            module = importlib.import_module(target)
            module.add_arguments(sub)
            sub.set_defaults(_run=module.run)
        else:
            _add_commands(sub, target, path[1:], dest=name)


class UsageError(Exception):
    """A command line the parser refuses (printed as one line, exit status 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would print the usage block and exit
        raise UsageError(f"{self.prog}: {message}")


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The ``dpglm`` parser, with arguments loaded for the command ``argv`` names."""
    parser = _Parser(
        prog="dpglm",
        description="Privacy-accounting-first differentially private bandits.",
    )
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    path = [arg for arg in argv if not arg.startswith("-")]
    _add_commands(parser, COMMANDS, path, dest="command")
    return parser


#: Exceptions that mean "the user asked for something impossible": one line, exit status 2.
USER_ERRORS = (UsageError, ValueError, TypeError, ImportError, OSError)
#: Exit status of a command whose reader closed the pipe early (``dpglm ... | head``): 128 + SIGPIPE, as a shell
#: reports a process that SIGPIPE ended (Python ignores SIGPIPE, so the write raises BrokenPipeError instead).
BROKEN_PIPE = 141


def _silence_closed_pipe() -> int:
    """The reader has gone: point stdout and stderr at /dev/null, so that nothing (not even the interpreter's
    final flush) writes to the closed pipe again, and end quietly with :data:`BROKEN_PIPE`."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        # a stream without a descriptor (captured in a test) has nothing to redirect
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, stream.fileno())
    os.close(devnull)
    return BROKEN_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; a user error is one line on stderr and exit status 2 (``--debug``: the traceback)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [arg for arg in argv if arg != "--debug"]  # accepted anywhere on the line
    path = [arg for arg in argv if not arg.startswith("-")]
    if path and path[0] in ("reproduce", "audit"):
        # Before numpy loads: one BLAS/OpenMP thread, as in every worker (bitwise-equal numbers).
        from dpglm.engine.engine import pin_threads

        pin_threads()
    try:
        args = build_parser(argv).parse_args(argv)
        code = int(args._run(args) or 0)
        sys.stdout.flush()  # a reader that closed the pipe early is found here, not at the interpreter's exit
        return code
    except BrokenPipeError:  # dpglm ... | head: the reader has what it wanted; results on disk are complete
        return _silence_closed_pipe()
    except USER_ERRORS as error:
        if debug:
            raise
        message = str(error) if isinstance(error, UsageError) else f"dpglm: error: {error}"
        print(" ".join(message.split()), file=sys.stderr)
        return 2
    except Exception as error:
        from dpglm.engine.engine import TaskFailures

        if debug or not isinstance(error, TaskFailures):
            raise
        print(f"dpglm: {error}", file=sys.stderr)  # the finished tasks are saved: one line, exit 1
        return 1
    except KeyboardInterrupt:
        if debug:
            raise
        print("dpglm: interrupted (a sweep resumes from its manifest when rerun with the same --out)",
              file=sys.stderr)
        return 130


def entry() -> NoReturn:
    """The ``dpglm`` console command and ``python -m dpglm.cli``: :func:`main`, then exit.

    Garbage collection is tuned for a process that imports much and ends: the young generation
    is collected every 10,000 allocations (not 700), so importing numpy, scipy and matplotlib
    (~10⁵ long-lived objects) no longer sets off full collections over them, and ``gc.freeze``
    at the end spares the interpreter's final collections over objects the exit frees anyway
    (together about 0.2 of the demo's 1.4 CPU s, ``python -m benchmarks.demo``; issue 26).
    Cyclic garbage is still collected; every file a command writes is closed before it returns,
    and atexit handlers still run. Not inside :func:`main`, which tests and notebooks call in a
    process that goes on.
    """
    gc.set_threshold(10_000, *gc.get_threshold()[1:])
    code = main()
    gc.freeze()
    sys.exit(code)

if __name__ == "__main__":
    entry()
