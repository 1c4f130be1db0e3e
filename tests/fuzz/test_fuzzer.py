"""The input fuzzer (``tests/fuzz/fuzzer.py``): mutated input files give one-line errors, never
a traceback, a hang or nonsense accepted."""

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the fuzzer lives beside its tests, not in the package
    sys.path.insert(0, str(HERE))

from fuzzer import fuzz  # noqa: E402


def test_fuzz_small_sample_is_clean():
    res = fuzz(n=30, seed=11)
    assert res["tracebacks"] == 0 and res["hangs"] == 0, res["examples"]
    assert res["nonsense_accepted"] == 0, res["examples"]
    assert res["must_refuse"] > 10  # the sample does hold nonsense


@pytest.mark.slow
def test_fuzz_400_files_is_clean():
    res = fuzz(n=400, seed=2026)
    assert res["tracebacks"] == res["hangs"] == res["nonsense_accepted"] == 0, res["examples"]
