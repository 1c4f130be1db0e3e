"""File-level mutations (issue #30): what a file is, not what it holds.

A valid file with a byte-order mark (read as if it had none), a key given twice, a YAML alias
bomb, nesting thousands deep, and paths that are not regular files: a named pipe nobody
writes, a link to ``/dev/zero``, a directory, a sparse file claiming 2 GiB. Each is a
:class:`fuzzer.Case` whose ``text`` is the file's bytes (or, with ``special``, what to put at
the path instead).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

#: A flow list of nine anchored lists, each nine aliases of the one before: 9^9 strings if
#: aliases are followed (issue #30's bomb).
BOMB_VALUE = "[&l0 [" + ", ".join(['"lol"'] * 9) + "], " + ", ".join(
    f"&l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)) + "]"
#: What ``special`` may ask for at the case's path; each must be refused, never read.
SPECIALS = ("fifo", "devlink", "dir", "sparse")
SPARSE_BYTES = 2 * 2**30


def with_bom(raw: bytes) -> bytes:
    return b"\xef\xbb\xbf" + raw


def duplicate_key(data: dict, raw: bytes, suffix: str) -> bytes | None:
    """``raw`` (the dump of mapping ``data``) with its first key given again; None when the
    file is not a mapping."""
    if not isinstance(data, dict) or not data:
        return None
    key, value = next(iter(data.items()))
    text = raw.decode()
    if suffix == ".csv":
        header, _, rest = text.partition("\n")
        row, _, tail = rest.partition("\n")
        return f"{header},{key}\n{row},{value}\n{tail}".encode()
    again = json.dumps(value, allow_nan=True)
    if suffix == ".jsonl":  # the first record
        first, _, rest = text.partition("\n")
        return (first.rstrip()[:-1] + f', {json.dumps(key)}: {again}}}\n{rest}').encode()
    if suffix == ".json":
        return (text.rstrip()[:-1] + f', {json.dumps(key)}: {again}}}').encode()
    return (text + f"{key}: {again}\n").encode()


def alias_bomb(data: dict, suffix: str) -> bytes | None:
    """Mapping ``data`` as YAML with its first key's value replaced by an alias bomb: a list
    whose last item expands to 9^9 strings, where a typed value goes (issue #30: the error
    builder rendered the expanded value, 3.2 GB). None for other file types."""
    if suffix != ".yaml" or not isinstance(data, dict) or not data:
        return None
    key = next(iter(data))
    text = yaml.safe_dump({**data, key: "BOMB_HERE"}, sort_keys=False, allow_unicode=True)
    return text.replace("BOMB_HERE", BOMB_VALUE, 1).encode()


def deep_nesting(suffix: str, depth: int = 5000) -> bytes | None:
    """Lists nested ``depth`` deep (None for CSV, which does not nest)."""
    return None if suffix == ".csv" else ("[" * depth + "]" * depth).encode()


def make_special(path: Path, special: str) -> None:
    """Put at ``path`` the non-regular file ``special`` names."""
    if special == "fifo":
        os.mkfifo(path)
    elif special == "devlink":
        path.symlink_to("/dev/zero")
    elif special == "dir":
        path.mkdir()
        (path / "inner.yaml").write_text("a: 1\n")
    elif special == "sparse":
        with open(path, "wb") as fh:
            fh.truncate(SPARSE_BYTES)
    else:
        raise ValueError(f"unknown special file {special!r}")
