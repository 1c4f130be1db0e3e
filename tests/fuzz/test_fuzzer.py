"""The fuzz gate (issue #30 item 6): 400 mutated input files of every format at seed 2026 and
100 at a random seed, each run in-process by the command that reads it, in a child whose
address space is capped: 0 tracebacks, 0 hangs, 0 memory blow-ups, 0 nonsense accepted."""

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the fuzzer lives beside its tests, not in the package
    sys.path.insert(0, str(HERE))

import filecases  # noqa: E402
from formats import FORMATS, GATE_FORMATS  # noqa: E402
from fuzzer import make_cases, run_case  # noqa: E402

GATE_ARGS = ["-n", "400", "--seed", "2026", "--random", "100", "--formats", "gate",
             "--address-space-gib", "4", "--timeout-s", "60", "--json"]


def test_fuzz_gate_every_format(capsys):
    proc = subprocess.run([sys.executable, str(HERE / "fuzzer.py"), *GATE_ARGS],
                          capture_output=True, text=True, timeout=1800)
    runs = json.loads(proc.stdout)["runs"]
    with capsys.disabled():  # logged on every run: a failure reruns with --seed SEED -n 100
        print(f"\nfuzz gate: seeds {[r['seed'] for r in runs]}, outcomes "
              f"{[(r['clean_errors'], r['accepted']) for r in runs]} (clean, accepted)")
    assert [r["cases"] for r in runs] == [400, 100]
    for res in runs:
        assert set(res["by_format"]) == set(GATE_FORMATS), res["by_format"]
        assert res["tracebacks"] == res["hangs"] == res["blowups"] == 0, (res["seed"],
                                                                           res["examples"])
        assert res["nonsense_accepted"] == 0, (res["seed"], res["examples"])
        assert res["must_refuse"] > res["cases"] // 3  # the sample does hold nonsense
    assert proc.returncode == 0, proc.stderr


def test_the_cases_cover_every_file_level_mutation():
    cases = make_cases(400, 2026, tuple(FORMATS))
    kinds = {c.mutation for c in cases}
    assert {"byte-order mark", "a key given twice", "YAML alias bomb",
            "nested 5,000 deep"} <= kinds
    assert {f"path is a {s}" for s in filecases.SPECIALS} <= kinds


def test_a_named_pipe_is_refused_not_waited_on(tmp_path):
    case = next(c for c in make_cases(400, 2026, ("job",)) if c.special == "fifo")
    out = run_case(case, tmp_path, timeout_s=20)
    assert out.result == "clean" and "named pipe" in out.stderr, out
