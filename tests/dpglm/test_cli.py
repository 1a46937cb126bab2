import importlib

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


def test_unknown_command_is_an_error():
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["no-such-command"])
    assert exit_info.value.code == 2


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
