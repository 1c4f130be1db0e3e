"""``netsim simulate``: run the packet-level or the flow-level engine.

The options both levels share are defined here; each level adds its own in
``tuner/cli/sim_packet.py`` and ``tuner/cli/sim_flow.py`` (``add_arguments`` / ``run``).
"""

from __future__ import annotations

import argparse
import importlib

from tuner.cli._output import add_command, add_json_flag
from tuner.cli._settings import add_argument as add_settings_argument

LEVELS = {"packet": "tuner.cli.sim_packet", "flow": "tuner.cli.sim_flow"}


def register(sub) -> argparse.ArgumentParser:
    p = add_command(
        sub, "simulate",
        "simulate traffic or a collective on a fabric (packet or flow level)",
        "Simulate traffic on a fabric with the packet-level (detailed) or the "
        "flow-level (scalable) engine.")
    p.add_argument("--level", choices=sorted(LEVELS), default="packet",
                   help="engine: packet (queues, PFC, ECN, retransmission) or flow (10k+ GPUs)")
    p.add_argument("--fabric", default=None,
                   help="fabric preset name or YAML/JSON file (default depends on --level)")
    p.add_argument("--size", default=None,
                   help="bytes per flow or per collective, e.g. 2MB, 1GiB, 4096")
    p.add_argument("--cc", default=None, choices=["none", "dcqcn", "swift", "hybrid"],
                   help="congestion control (packet: per QP; flow: sharing model)")
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    add_settings_argument(p)
    add_json_flag(p)
    for module_name in LEVELS.values():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        module.add_arguments(p)
    return p


def run(args: argparse.Namespace) -> int:
    module = importlib.import_module(LEVELS[args.level])
    return module.run(args)
