import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dpglm import cli


def _leaves(commands, prefix=()):
    for name, target, _help in commands:
        if isinstance(target, str):
            yield (*prefix, name), target
        else:
            yield from _leaves(target, (*prefix, name))


LEAVES = list(_leaves(cli.COMMANDS))


@pytest.mark.parametrize("path, module_name", LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_every_command_module_exposes_the_command_protocol(path, module_name):
    module = importlib.import_module(module_name)
    assert callable(module.add_arguments) and callable(module.run)
    parser = cli.build_parser(list(path))
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args([*path, "--help"])
    assert exit_info.value.code == 0


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for name, _target, _help in cli.COMMANDS:
        assert name in out


def test_unknown_command_is_an_error(capsys):
    assert cli.main(["no-such-command"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "invalid choice" in err and "Traceback" not in err


def test_help_imports_no_command_module():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from dpglm import cli\n"
        "try:\n"
        "    cli.main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in ('torch', 'matplotlib', 'audits.command', 'dpglm.commands.demo') if m in sys.modules]\n"
        "print('HEAVY:' + ','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "HEAVY:"


USER_ERRORS = [
    (["nope"], "invalid choice"),
    (["reproduce"], "required"),
    (["reproduce", "table2", "--runs", "0"], "--runs"),
    (["reproduce", "table2", "--horizon", "0"], "--horizon"),
    (["reproduce", "table2", "--runs", "abc"], "invalid int"),
    (["reproduce", "table2", "--jobs", "0"], "--jobs"),
    (["reproduce", "table2", "--seed", "-1"], "--seed"),
    (["reproduce", "table2", "--presets", "nope"], "invalid choice"),
    (["reproduce", "table2", "--format", "xlsx"], "invalid choice"),
    (["reproduce", "table2", "--address", "localhost"], "tcp://"),
    (["reproduce", "table2", "--scheduler-file", "/no/such/file.json"], "does not exist"),
    (["reproduce", "table2", "--address", "tcp://127.0.0.1:1", "--scheduler-file", "f"], "not allowed with"),
    (["reproduce", "fig1", "--epsilons", "0"], "--epsilons"),
    (["reproduce", "fig1", "--replot", "--out", "{tmp}"], "--replot needs"),
    (["reproduce", "shuffle", "--dims", "0"], "--dims"),
    (["reproduce", "shuffle", "--epsilons", "-1"], "--epsilons"),
    (["reproduce", "bai", "--runs", "1"], "--runs"),
    (["reproduce", "bai", "--max-steps", "5"], "--max-steps"),
    (["audit", "nonsense"], "unknown audit"),
    (["audit", "laplace", "--runs", "5"], "--runs"),
    (["audit", "laplace", "--epsilon", "0"], "--epsilon"),
    (["audit", "laplace", "--jobs", "0"], "--jobs"),
    (["demo", "--horizon", "0"], "--horizon"),
    (["demo", "--delta", "1.5"], "--delta"),
    (["ledger", "show", "{tmp}/missing.db"], "missing.db"),
]


@pytest.mark.parametrize("argv, message", USER_ERRORS, ids=[" ".join(a) for a, _ in USER_ERRORS])
def test_every_user_error_is_one_line_and_exit_status_2(argv, message, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if "--out" not in argv and argv[0] in ("reproduce", "audit", "demo") and argv != ["reproduce"]:
        argv += ["--out", str(tmp_path / "out")]
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], captured.err
    assert "Traceback" not in captured.err and not (tmp_path / "out").exists()


def test_debug_shows_the_exception():
    with pytest.raises(ValueError, match="--runs"):
        cli.main(["reproduce", "table2", "--runs", "0", "--debug"])


def test_quick_sets_defaults_but_never_overrides_a_flag():
    from dpglm.experiments import fig1, shuffle, table2

    def parse(*argv):
        return cli.build_parser(list(argv)).parse_args(list(argv))

    sweep = table2.build_sweep(parse("reproduce", "table2", "--quick", "--runs", "5", "--horizon", "400"))
    assert sweep.seeds == 5 and sweep.instances[0].horizon == 400
    sweep = table2.build_sweep(parse("reproduce", "table2", "--quick"))
    assert sweep.seeds == 1 and sweep.instances[0].horizon == 300
    sweep = fig1.build_sweep("probit", parse("reproduce", "fig1", "--quick", "--epsilons", "2", "--runs", "3"))
    assert sweep.epsilons == (2.0,) and sweep.seeds == 3 and sweep.instances[0].horizon == 300
    cells = shuffle.build_cells(parse("reproduce", "shuffle", "--quick", "--epsilons", "2", "--horizons", "700"))
    assert {c.epsilon for c in cells if c.algorithm == "ShuffleDP-GLM"} == {2.0}
    assert {c.instance.horizon for c in cells} == {700}
    cells = shuffle.build_cells(parse("reproduce", "shuffle", "--quick"))
    assert {c.epsilon for c in cells if c.algorithm == "ShuffleDP-GLM"} == {8.0}


def test_a_cell_that_fails_twice_is_one_line_and_exit_status_1(tmp_path, capsys, monkeypatch):
    from dpglm.experiments import sweep

    def broken(cell):
        raise ArithmeticError("boom")

    monkeypatch.setattr(sweep, "run_cell", broken)
    argv = ["reproduce", "table2", "--quick", "--runs", "1", "--jobs", "1", "--no-progress", "--out", str(tmp_path)]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "failed twice" in err[-1] and "boom" in err[-1] and "Traceback" not in "".join(err)


OUTPUT_COMMANDS = [["demo"], ["reproduce", "table2", "--quick"], ["reproduce", "fig1", "--quick"],
                   ["reproduce", "shuffle", "--quick"], ["reproduce", "bai", "--quick"],
                   ["audit", "laplace", "--quick"]]


@pytest.mark.parametrize("argv", OUTPUT_COMMANDS, ids=[" ".join(a) for a in OUTPUT_COMMANDS])
def test_out_that_is_a_file_fails_first_naming_the_flag(argv, tmp_path, capsys, monkeypatch):
    import dpglm.experiments.registry as registry

    def no_work(*args, **kwargs):
        raise AssertionError("a run started before --out was checked")

    monkeypatch.setattr(registry, "play_cell", no_work)
    monkeypatch.setattr("dpglm.experiments.sweep.play_cell", no_work)
    monkeypatch.setattr(registry, "play", no_work)
    taken = tmp_path / "README.md"
    taken.write_text("not a directory")
    for out in (taken, taken / "below"):
        assert cli.main([*argv, "--out", str(out)]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("dpglm: error: --out: "), lines
        assert str(taken) in lines[0] and "Traceback" not in lines[0]
    assert taken.read_text() == "not a directory"


@pytest.mark.parametrize("command", ["table2", "fig1", "shuffle"])
def test_format_parquet_without_pyarrow_fails_before_any_run(command, tmp_path, capsys, monkeypatch):
    import dpglm.experiments.registry as registry

    def no_work(*args, **kwargs):
        raise AssertionError("a run started before --format was checked")

    monkeypatch.setattr(registry, "play_cell", no_work)
    monkeypatch.setattr("dpglm.experiments.sweep.play_cell", no_work)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    out = tmp_path / "out"
    assert cli.main(["reproduce", command, "--quick", "--format", "parquet", "--out", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--format parquet needs pyarrow" in lines[0], lines
    assert not out.exists()


def _as_process(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    root = Path(cli.__file__).resolve().parents[1]
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(root)})


def test_the_demo_as_a_process_exits_0_with_its_files_whole(tmp_path):
    """``python -m dpglm.cli`` runs :func:`cli.entry` (gc frozen at the exit): the files are complete."""
    out = tmp_path / "demo"
    done = _as_process("-m", "dpglm.cli", "demo", "--out", str(out), "--horizon", "200", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "summary.json").read_text())["setting"]["horizon"] == 200
    assert len((out / "regret.csv").read_text().splitlines()) == 1 + 200
    png = (out / "regret.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png.endswith(b"IEND\xaeB`\x82")
    refused = _as_process("-m", "dpglm.cli", "demo", "--horizon", "0", "--out", str(tmp_path / "x"), cwd=tmp_path)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1 and "--horizon" in refused.stderr


def test_entry_exits_with_main_s_status_after_tuning_the_collector(tmp_path):
    code = ("import atexit, gc, sys\n"
            "from dpglm import cli\n"
            "cli.main = lambda: 3\n"
            "atexit.register(lambda: print(gc.get_threshold()[0], gc.get_freeze_count() > 0))\n"
            "cli.entry()\n")
    done = _as_process("-c", code, cwd=tmp_path)
    assert done.returncode == 3 and done.stdout.split() == ["10000", "True"], done
