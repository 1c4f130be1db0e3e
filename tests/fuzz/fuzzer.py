"""Fuzz the input files of the CLI: mutate valid input files of every kind, run the commands
that read them in-process, and count tracebacks, hangs, memory blow-ups and nonsense accepted.

Each case takes a valid file of one format (``formats.FORMATS``: fabric, job, Hugging Face
config, sweep spec, RUNNING.yaml, cluster CSV, Kineto trace, calibration, placement,
free-server file, settings directory, trainer rank trace, the trainer's --config and
--placement files) and applies one mutation: a key set to a wrong type,
null, NaN, infinity, a huge or negative number, a word where a number goes; a key removed or
added; the whole file replaced by non-UTF-8 bytes, a list, a scalar or broken syntax; or a
file-level one (``filecases``: a byte-order mark, a key given twice, a YAML alias bomb, deep
nesting, a named pipe, a link to /dev/zero, a directory, a sparse 2 GiB file). An oracle built
from the schema (the dataclass annotations) says whether the mutation must be refused
("nonsense") or may go either way (a zero, a huge count, a removed key). Outcomes:

``clean``      exit 2 with exactly one line on stderr (a clean one-line error);
``accepted``   exit 0 (a sane run, unless the oracle says nonsense);
``traceback``  an exception escaped, or stderr held more than one line;
``hang``       the case ran past its time limit (SIGALRM);
``blowup``     ``MemoryError``: the address space is capped (``--address-space-gib``, RLIMIT_AS)
               so a memory blow-up fails fast instead of taking the machine.

``nonsense_accepted`` counts cases the oracle says must be refused that exited 0. The gate
(``tests/fuzz/test_fuzzer.py``) runs 400 cases of every format at seed 2026 and 100 at a
random seed it logs (``--formats gate``: all but ``formats.PENDING``), and wants 0
tracebacks, hangs, blow-ups and nonsense accepted. Run::

    python tests/fuzz/fuzzer.py --seed 2026 -n 400 --formats gate --random 100 --json
    python tests/fuzz/fuzzer.py --seed 2026 -n 400 --json        # fabric and job only
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import math
import os
import resource
import secrets
import signal
import sys
import tempfile
import typing
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import yaml

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # run as a script or imported by the tests beside it
    sys.path.insert(0, str(HERE))

import filecases  # noqa: E402
from formats import DEFAULT_FORMATS, FORMATS, GATE_FORMATS, PENDING  # noqa: E402

#: Values a key is set to, with the oracle's category.
WORDS = ["abc", "h100", "megascale", "", "1e3", "true", "\u00b2"]
CONTAINERS = [[1, 2], {"a": 1}, []]
SPECIALS = [None, True, False, math.nan, math.inf, -math.inf]
NUMBERS = [-5, 0, 0.5, 2.5, 65, 10**12, 10**30, 1e308, -1e308, 1e-300]


@dataclasses.dataclass
class Case:
    """One mutated file and what the oracle expects of it."""

    format: str                 # a key of formats.FORMATS
    mutation: str               # human-readable description
    must_refuse: bool           # True: accepting it is nonsense
    text: bytes                 # the file's bytes
    suffix: str = ".yaml"
    key: str | None = None      # the key set to a new value, if any
    special: str | None = None  # a non-regular file at the path instead (filecases.SPECIALS)


@dataclasses.dataclass
class Outcome:
    case: Case
    result: str                 # clean | accepted | traceback | hang | blowup
    rc: int | None
    stderr: str


# ---------------------------------------------------------------------------------------------
# The schema oracle


def _hints(fmt: str, data: dict) -> dict[str, Any]:
    return typing.get_type_hints(FORMATS[fmt].schema(data))


def _is_nonsense(value: Any, tp: Any, key: str) -> bool:
    """True when ``value`` can never be right for a key of annotation ``tp``."""
    args = typing.get_args(tp)
    optional = type(None) in args
    members = [a for a in args if a is not type(None)]
    if len(members) > 1 and value is not None:  # str | int: nonsense for every member
        return all(_is_nonsense(value, m, key) for m in members)
    base = next((a for a in args if a is not type(None)), tp) if args and optional else tp
    if value is None:
        return not optional
    if isinstance(value, float) and not math.isfinite(value):
        return True
    if key == "overlap":
        return not isinstance(value, dict) and value not in ("megascale", "none")
    if base is bool:
        return not isinstance(value, bool)
    if base in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return True
        if base is int and value != int(value):
            return True
        return value < 0
    if base is str:
        return not isinstance(value, str)
    if typing.get_origin(base) is tuple:
        return not isinstance(value, list)
    return False


# ---------------------------------------------------------------------------------------------
# Mutations


def _dump(data: Any, suffix: str, fmt: str | None = None) -> bytes:
    f = FORMATS.get(fmt) if fmt else None
    if f is not None:
        data = f.wrap(data) if isinstance(data, dict) else data
        if f.dump is not None:
            return f.dump(data)
    if suffix == ".json":
        return json.dumps(data, allow_nan=True).encode()
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode()


def _value_case(fmt: str, base: dict, rng: np.random.Generator, suffix: str) -> Case:
    hints = _hints(fmt, base)
    keys = [k for k in base if k != "kind"] + [k for k in hints if k not in base]
    key = keys[int(rng.integers(len(keys)))]
    pool = WORDS + CONTAINERS + SPECIALS + NUMBERS
    value = pool[int(rng.integers(len(pool)))]
    data = {**base, key: value}
    seen = FORMATS[fmt].as_read(key, value)
    ignored = key not in hints and FORMATS[fmt].extra_keys_ok  # a key the reader skips
    infinite_ok = key in FORMATS[fmt].allow_inf and value == math.inf  # e.g. a fit's rate
    must = not ignored and not infinite_ok and _is_nonsense(seen, hints.get(key, Any), key)
    return Case(fmt, f"{key}: {value!r}", must, _dump(data, suffix, fmt), suffix, key)


def _structure_case(fmt: str, base: dict, rng: np.random.Generator, suffix: str) -> Case:
    choice = int(rng.integers(6))
    if choice == 0:
        data = {**base, "colour": "red"}
        # config.json files carry many keys the suite does not read: an extra one is fine
        return Case(fmt, "unknown key colour", not FORMATS[fmt].extra_keys_ok,
                    _dump(data, suffix, fmt), suffix)
    if choice == 1:
        key = list(base)[int(rng.integers(len(base)))]
        data = {k: v for k, v in base.items() if k != key}
        return Case(fmt, f"key {key} removed", fmt != "job" and key in FORMATS[fmt].required,
                    _dump(data, suffix, fmt), suffix)
    if choice == 2:
        raw = _dump(base, suffix, fmt)
        cut = int(rng.integers(1, len(raw)))
        return Case(fmt, "non-UTF-8 byte inserted", True, raw[:cut] + b"\xff\xfe" + raw[cut:],
                    suffix)
    if choice == 3:
        return Case(fmt, "top level is a list", True, _dump([base], suffix, fmt), suffix)
    if choice == 4:
        return Case(fmt, "top level is a number", True, _dump(42, suffix, fmt), suffix)
    raw = _dump(base, suffix, fmt)
    return Case(fmt, "file truncated", False, raw[: int(rng.integers(1, len(raw)))], suffix)


def _file_case(fmt: str, base: dict, rng: np.random.Generator, suffix: str) -> Case:
    """A file-level mutation (``filecases``); a valid file with a byte-order mark is valid."""
    raw = _dump(base, suffix, fmt)
    wrapped = FORMATS[fmt].wrap(base)
    choice = int(rng.integers(4 + len(filecases.SPECIALS)))
    made = {0: ("byte-order mark", False, filecases.with_bom(raw)),
            1: ("a key given twice", True, filecases.duplicate_key(wrapped, raw, suffix)),
            2: ("YAML alias bomb", True, filecases.alias_bomb(wrapped, suffix)),
            3: ("nested 5,000 deep", True, filecases.deep_nesting(suffix))}.get(choice)
    if made is None:
        special = filecases.SPECIALS[choice - 4]
        return Case(fmt, f"path is a {special}", True, b"", suffix, special=special)
    what, must, text = made
    if text is None:  # the mutation does not apply to this file type: a BOM does
        what, must, text = "byte-order mark", False, filecases.with_bom(raw)
    return Case(fmt, what, must, text, suffix)


def make_cases(n: int, seed: int, formats: tuple[str, ...] = DEFAULT_FORMATS) -> list[Case]:
    """``n`` mutated files, the formats taking turns, drawn from ``seed``: 60% a value, 20% the
    structure, 20% the file itself."""
    rng = np.random.default_rng(seed)
    bases = {f: FORMATS[f].bases() for f in formats}
    cases = []
    for i in range(n):
        fmt = formats[i % len(formats)]
        base = bases[fmt][int(rng.integers(len(bases[fmt])))]
        sfx = FORMATS[fmt].suffixes
        suffix = (".json" if rng.random() < 0.3 else ".yaml") if len(sfx) > 1 else sfx[0]
        u = rng.random()
        make = _value_case if u < 0.6 else _structure_case if u < 0.8 else _file_case
        cases.append(make(fmt, base, rng, suffix))
    return cases


# ---------------------------------------------------------------------------------------------
# Running


class _Timeout(BaseException):
    pass


def _alarm(signum, frame):  # pragma: no cover - only on a hang
    raise _Timeout()


def _write_case(case: Case, workdir: Path) -> Path:
    """The case's file in a directory of its own (with the format's sibling files)."""
    fmt = FORMATS[case.format]
    d = Path(tempfile.mkdtemp(prefix=f"{case.format}-", dir=workdir))
    fmt.setup(d)
    path = d / f"{fmt.filename}{case.suffix}"
    if case.special:
        filecases.make_special(path, case.special)
    else:
        path.write_bytes(case.text)
    return path


def _main(fmt: str, path: str) -> int:
    """The exit status of reading ``path``: ``netsim ARGV``, or the format's own reader
    (``Format.call``: a refusal, InputError included, is one line and exit status 2)."""
    f = FORMATS[fmt]
    if f.call is None:
        from tuner.cli import main

        return main(f.argv(path))
    try:
        f.call(path)
    except (ValueError, OSError) as exc:  # inputspec.InputError is a ValueError
        print(exc, file=sys.stderr)
        return 2
    return 0


def _call(fmt: str, path: str, timeout_s: int) -> tuple[str, int | None, str]:
    """Read ``path`` as format ``fmt`` in-process: (result, exit status, stderr or the
    exception)."""
    err, out = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout_s)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            rc = _main(fmt, path)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 2
    except _Timeout:
        return "hang", None, ""
    except MemoryError:
        return "blowup", None, "MemoryError"
    except BaseException as exc:  # noqa: BLE001 - a traceback is what we count
        return "traceback", None, f"{type(exc).__name__}: {exc}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return "ran", rc, err.getvalue().strip()


def run_case(case: Case, workdir: Path, timeout_s: int = 60) -> Outcome:
    """Run the command that reads the case's file, in-process, and classify the outcome."""
    path = _write_case(case, workdir)
    result, rc, text = _call(case.format, str(path), timeout_s)
    if result != "ran":
        return Outcome(case, result, rc, text)
    if rc == 0:
        return Outcome(case, "accepted", rc, text)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    # a sweep whose points failed exits 1 with one summary line (issue #29): clean too
    ok = (rc == 2 or (rc == 1 and case.format == "sweep")) and len(lines) == 1
    return Outcome(case, "clean" if ok else "traceback", rc, text)


def cap_address_space(gib: float) -> None:
    """RLIMIT_AS of this process (call it in a child: a blow-up then fails fast with
    ``MemoryError`` instead of taking the machine)."""
    limit = int(gib * 2**30)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY
                                            else min(limit, hard), hard))


def fuzz(n: int = 400, seed: int = 2026, timeout_s: int = 60,
         memory_limit_bytes: int = 2**30,
         formats: tuple[str, ...] = DEFAULT_FORMATS) -> dict[str, Any]:
    """Run ``n`` cases; returns the counts and the offending cases.

    The memory limit (``NETSIM_MEMORY_LIMIT_BYTES``) is lowered to ``memory_limit_bytes`` so
    that huge-but-valid files are refused by the resource bound instead of taking minutes.
    """
    old_limit = os.environ.get("NETSIM_MEMORY_LIMIT_BYTES")
    os.environ["NETSIM_MEMORY_LIMIT_BYTES"] = str(memory_limit_bytes)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            outcomes = [run_case(c, Path(tmp), timeout_s)
                        for c in make_cases(n, seed, formats)]
    finally:
        if old_limit is None:
            os.environ.pop("NETSIM_MEMORY_LIMIT_BYTES", None)
        else:
            os.environ["NETSIM_MEMORY_LIMIT_BYTES"] = old_limit
    return summarize(outcomes, n, seed)


def gate_ok(res: dict[str, Any]) -> bool:
    """The fuzz gate: no traceback, hang, blow-up or nonsense accepted."""
    return res["tracebacks"] == res["hangs"] == res["blowups"] == res["nonsense_accepted"] == 0


def summarize(outcomes: list[Outcome], n: int, seed: int) -> dict[str, Any]:
    counts = Counter(o.result for o in outcomes)
    nonsense = [o for o in outcomes if o.case.must_refuse and o.result == "accepted"]
    bad = [o for o in outcomes if o.result in ("traceback", "hang", "blowup")]
    unnamed = [o for o in outcomes if o.result == "clean"
               and FORMATS[o.case.format].filename not in o.stderr]
    keyed = [o for o in outcomes if o.result == "clean" and o.case.key]
    field_named = [o for o in keyed if o.case.key in o.stderr]
    return {
        "cases": n, "seed": seed,
        "by_format": dict(Counter(o.case.format for o in outcomes)),
        "clean_errors": counts["clean"], "accepted": counts["accepted"],
        "tracebacks": counts["traceback"], "hangs": counts["hang"],
        "blowups": counts["blowup"],
        "must_refuse": sum(o.case.must_refuse for o in outcomes),
        "nonsense_accepted": len(nonsense),
        "errors_without_file": len(unnamed),
        "key_errors": len(keyed), "key_errors_naming_the_key": len(field_named),
        "examples": {
            "tracebacks": [f"{o.case.format} {o.case.mutation} ({o.result}): {o.stderr[:200]}"
                           for o in bad],
            "nonsense_accepted": [f"{o.case.format} {o.case.mutation}" for o in nonsense],
            "errors_without_file": [o.stderr[:200] for o in unnamed],
            "key_errors_not_naming_the_key": [f"{o.case.mutation}: {o.stderr[:200]}"
                                              for o in keyed if o not in field_named],
        },
    }


def _print(res: dict[str, Any]) -> None:
    for k, v in res.items():
        if k != "examples":
            print(f"{k:>20}: {v}")
    for k, v in res["examples"].items():
        for line in v:
            print(f"{k}: {line}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python tests/fuzz/fuzzer.py",
                                description=__doc__.split("\n")[0])
    p.add_argument("-n", type=int, default=400, help="number of mutated files (default 400)")
    p.add_argument("--seed", type=int, default=2026, help="seed of the mutations")
    p.add_argument("--random", type=int, default=0, metavar="N",
                   help="then N more cases at a random seed, logged in the output")
    p.add_argument("--timeout-s", type=int, default=60, help="per-case limit counted as a hang")
    p.add_argument("--address-space-gib", type=float, default=None,
                   help="cap this process's address space (RLIMIT_AS); a MemoryError then "
                        "counts as a blow-up")
    p.add_argument("--formats", default=",".join(DEFAULT_FORMATS),
                   help=f"comma-separated formats, 'all' ({', '.join(FORMATS)}) or 'gate' "
                   f"(all but {', '.join(PENDING) or 'none'}; default "
                   f"{','.join(DEFAULT_FORMATS)})")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = p.parse_args(argv)
    formats = {"all": tuple(FORMATS), "gate": GATE_FORMATS}.get(
        args.formats, tuple(args.formats.split(",")))
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        p.error(f"--formats: unknown {', '.join(unknown)}; choose from {', '.join(FORMATS)}")
    if args.address_space_gib:
        cap_address_space(args.address_space_gib)
    runs = [fuzz(args.n, args.seed, args.timeout_s, formats=formats)]
    if args.random:
        seed = secrets.randbits(32)
        print(f"fuzzer: random seed {seed} ({args.random} cases)", file=sys.stderr)
        runs.append(fuzz(args.random, seed, args.timeout_s, formats=formats))
    if args.json:
        print(json.dumps(runs[0] if len(runs) == 1 else {"runs": runs}, indent=2))
    else:
        for res in runs:
            _print(res)
    return 0 if all(gate_ok(r) for r in runs) else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
