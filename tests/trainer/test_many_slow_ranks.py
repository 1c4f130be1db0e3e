"""A repeated ``--inject-slow-rank`` keeps every rank named (issue #27 item 6), each with its
own factor (``R:F``) or ``--slow-factor``."""

from __future__ import annotations

import pytest

from trainer.cli import build_parser, config_from_args
from trainer.faults import FaultConfig, FaultInjector


def _faults(*argv: str) -> FaultConfig:
    args = build_parser().parse_args(["--tp", "2", "--dp", "4", *argv])
    return config_from_args(args, 8).fault_config()


def test_every_repeated_slow_rank_is_kept():
    f = _faults("--inject-slow-rank", "1", "--inject-slow-rank", "6:1.5", "--slow-factor", "2")
    assert f.slow_ranks == ((1, 2.0), (6, 1.5)) and f.active
    assert [f.factor_of(r) for r in range(8)] == [1, 2, 1, 1, 1, 1, 1.5, 1]
    slowed = [FaultInjector(f, r, tracer=None).slow for r in range(8)]
    assert slowed == [False, True, False, False, False, False, True, False]


def test_one_slow_rank_and_yaml_forms():
    assert _faults("--inject-slow-rank", "3", "--slow-factor", "2").slow_ranks == ((3, 2.0),)
    assert FaultConfig(slow_rank=2, slow_factor=1.3).slow_ranks == ((2, 1.3),)
    assert FaultConfig(slow_ranks=((4, 1.2),)).slow_rank == 4


@pytest.mark.parametrize("argv,msg", [(["--inject-slow-rank", "9"], "outside the world"),
                                      (["--inject-slow-rank", "1:x"], "R or R:F"),
                                      (["--inject-slow-rank", "1:0.5"], "slow_factor")])
def test_bad_slow_ranks_are_refused(argv, msg):
    with pytest.raises(ValueError, match=msg):
        _faults(*argv)
