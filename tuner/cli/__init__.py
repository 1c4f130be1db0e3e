"""The ``netsim`` console script: one parser, one module per subcommand.

Each subcommand lives in ``tuner/cli/<name>.py`` and exposes two functions:

``register(subparsers) -> argparse.ArgumentParser``
    add its parser (with ``help=``) and its arguments;
``run(args) -> int``
    do the work through one library call and render the result (``_output.emit``).

Errors that come from bad input (``ValueError``, ``OSError``, :class:`UsageError`) are
turned into a single line on stderr and exit status 2, never a traceback. Set
``NETSIM_DEBUG=1`` to see the traceback instead.

The dispatcher sits in ``tuner`` because it is the top of the dependency order
(``topologies`` <- ``netsim`` <- ``tuner``): no lower package imports it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from tuner.cli._output import UsageError
from tuner.cli._progress import ticker

# Order is the order shown in ``netsim --help``.
SUBCOMMANDS = (
    "topo",
    "simulate",
    "collective_bench",
    "predict",
    "calibrate",
    "place",
    "recommend",
    "probe",
    "sweep",
    "diagnose",
    "cluster",
)


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every available subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="netsim",
        description="Simulate and tune RoCE/RDMA fabrics for large-model training.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"tuner.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"tuner.cli.{name}":
                continue  # subcommand not built yet
            raise
        cmd = module.register(sub)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``netsim`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with ticker(args.command):  # progress on a terminal for runs longer than 2 s
            return int(args._run(args) or 0)
    except (UsageError, ValueError, OSError, KeyError) as exc:
        if os.environ.get("NETSIM_DEBUG"):
            raise
        print(f"netsim {args.command}: error: {error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"netsim {args.command}: interrupted", file=sys.stderr)
        return 130


def error_line(exc: BaseException) -> str:
    """The one line a refusal prints: the message (a ``KeyError``'s key text, an ``OSError``
    with its path), cut to ``inputspec``'s readable length."""
    from inputspec.errors import cut

    msg = str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)
    if isinstance(exc, OSError) and exc.filename is not None and str(exc.filename) not in msg:
        msg = f"{exc.filename}: {msg}"
    return cut(msg)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
