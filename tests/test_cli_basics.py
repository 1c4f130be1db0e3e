"""Every subcommand has --help; bad input is one line on stderr and a non-zero exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tuner.cli import build_parser, main


def _subcommands():
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return sorted(action.choices)


def test_netsim_help_lists_subcommands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in _subcommands():
        assert name in out


@pytest.mark.parametrize("name", _subcommands())
def test_every_subcommand_has_help(name, capsys):
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_console_script_installed():
    """The `netsim` entry point runs as a module too (python -m tuner.cli)."""
    proc = subprocess.run([sys.executable, "-m", "tuner.cli", "--help"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "netsim" in proc.stdout
