"""Outputs written as a set: a directory appears whole or not at all (issue #30).

Every ``netsim`` command that writes a directory of files (``recommend -o DIR``) goes through
:func:`output_set`: the files are written into a temporary sibling directory
(``.DIR.tmp-PID-TOKEN``), a ``manifest.json`` (command, arguments, package version, seed,
sha256 of every input and output file) is written last, and the directory is renamed into
place. A ``DIR`` left by an earlier run is replaced as a whole: renamed aside, the new one
renamed in, the old one removed, so a reader never sees files of two runs and a crash at any
point leaves either the old complete set or the new one.

A second writer on the same ``DIR`` is refused while the first runs (:func:`output_lock`:
``DIR.lock`` created with ``O_EXCL``, holding the writer's pid and host; a lock whose pid is
dead on this host is stale and taken over). :func:`check_output_dir` and
:func:`check_output_file` find an unwritable ``-o`` before the work starts. Every error is a
one-line ``ValueError`` naming its path (the CLI prints it and exits 2).

Single-file outputs (``calibrate -o``, ``place -o``) use :func:`write_file_atomic`: a
temporary sibling, fsync, rename.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import secrets
import shutil
import socket
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
MANIFEST_SCHEMA = "netsim-output/1"
LOCK_SUFFIX = ".lock"
#: An unreadable lock (a writer killed between creating it and writing its pid) counts as
#: stale once it is older than this.
LOCK_UNREADABLE_STALE_S = 10.0
#: The files ``netsim recommend`` wrote before manifests existed: a directory holding only
#: these (and no subdirectory) is an earlier run's output and may be replaced.
RECOMMEND_FILES = ("nccl.env", "nccl_tuner.csv", "nic_dcqcn.conf", "switch_qos.yaml",
                   "placement.json", "report.md", "nic_setup.sh", "netsim_tuner.c",
                   "libnetsim_tuner.so", "sonic_config_db_*.json", "switch_nvue_*.txt")

_HELD: dict[Path, int] = {}  # lock path -> nesting depth, for this process


class OutputError(ValueError):
    """An output that cannot be written; one line naming the path."""


def package_version() -> str:
    """The installed ``roce-netsim`` version ("unknown" when run from a bare tree)."""
    from importlib import metadata

    try:
        return metadata.version("roce-netsim")
    except metadata.PackageNotFoundError:
        return "unknown"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def input_hashes(values: Iterable[Any]) -> dict[str, str]:
    """sha256 of every value that names an existing regular file (the run's input files)."""
    out: dict[str, str] = {}
    for v in values:
        if isinstance(v, (str, os.PathLike)) and str(v) and os.path.isfile(v):
            out[str(v)] = sha256_file(Path(v))
    return out


def _abs(path: str | os.PathLike) -> Path:
    return Path(os.path.abspath(os.fspath(path)))


# --------------------------------------------------------------------------- checks


def _replaceable(final: Path, legacy: Iterable[str]) -> bool:
    """An empty directory, an earlier output set (its manifest), or only files an earlier
    run of the same writer wrote (``legacy`` name patterns)."""
    entries = list(final.iterdir())
    if not entries:
        return True
    manifest = final / MANIFEST
    if manifest.is_file():
        with contextlib.suppress(OSError, ValueError):
            if json.loads(manifest.read_text()).get("schema") == MANIFEST_SCHEMA:
                return True
    pats = tuple(legacy)
    return all(e.is_file() and not e.is_symlink()
               and any(fnmatch.fnmatchcase(e.name, p) for p in pats) for e in entries)


def _probe_writable(folder: Path, what: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = _mkstemp(folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(f"{what}: cannot write there ({_reason(exc)})") from None


def _mkstemp(folder: Path) -> tuple[int, str]:
    import tempfile

    return tempfile.mkstemp(prefix=".netsim-probe-", dir=folder)


def _reason(exc: OSError) -> str:
    where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
    return f"{exc.strerror or exc}{where}"


def check_output_dir(path: str | os.PathLike, legacy: Iterable[str] = ()) -> Path:
    """Refuse, before any work, an output directory that cannot be written or replaced:
    a file in its place, an unwritable or impossible parent, or a directory holding other
    things than an earlier output set. Creates the parent; returns the absolute path."""
    final = _abs(path)
    if final.exists() and not final.is_dir():
        raise OutputError(f"{final}: exists and is not a directory")
    if final.is_dir() and not _replaceable(final, legacy):
        raise OutputError(f"{final}: holds files that are not an earlier output of this "
                          f"command (no {MANIFEST}); it would be replaced as a whole: choose a "
                          "new or empty -o directory")
    _probe_writable(final.parent, final)
    return final


def check_resumable_dir(path: str | os.PathLike) -> Path:
    """Refuse, before any work, a results directory that is appended to across runs
    (``netsim sweep -o DIR``: resumable, so never replaced) but cannot be written: a file in
    its place or an unwritable location. Creates it; returns it absolute."""
    final = _abs(path)
    if final.exists() and not final.is_dir():
        raise OutputError(f"{final}: exists and is not a directory")
    _probe_writable(final, final)
    return final


def check_output_file(path: str | os.PathLike) -> Path:
    """Refuse, before any work, an output file that cannot be written; returns it absolute."""
    final = _abs(path)
    if final.is_dir():
        raise OutputError(f"{final}: is a directory, not a file")
    if final.exists() and not final.is_file():
        raise OutputError(f"{final}: exists and is not a regular file")
    _probe_writable(final.parent, final)
    return final


# --------------------------------------------------------------------------- lock


def lock_path(final: Path) -> Path:
    return final.parent / (final.name + LOCK_SUFFIX)


def _lock_owner(lock: Path) -> dict | None:
    try:
        doc = json.loads(lock.read_text())
        return doc if isinstance(doc, dict) and isinstance(doc.get("pid"), int) else None
    except (OSError, ValueError):
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stale(lock: Path, owner: dict | None) -> bool:
    if owner is None:
        with contextlib.suppress(OSError):
            return time.time() - lock.stat().st_mtime > LOCK_UNREADABLE_STALE_S
        return True  # gone meanwhile: retry
    return owner.get("host") == socket.gethostname() and not _pid_alive(owner["pid"])


def _acquire(lock: Path, final: Path) -> None:
    me = json.dumps({"pid": os.getpid(), "host": socket.gethostname()}) + "\n"
    for _ in range(3):
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            owner = _lock_owner(lock)
            if not _stale(lock, owner):
                who = (f"pid {owner['pid']} on {owner.get('host')}" if owner
                       else "a process that has not written its pid yet")
                raise OutputError(f"{final}: another netsim is writing it ({who}, lock "
                                  f"{lock}); wait for it, or remove the lock if that process "
                                  "is gone") from None
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
            continue
        except OSError as exc:
            raise OutputError(f"{lock}: cannot create the output lock ({_reason(exc)})") from None
        with os.fdopen(fd, "w") as fh:
            fh.write(me)
        return
    raise OutputError(f"{final}: could not take the output lock {lock}")


@contextlib.contextmanager
def output_lock(path: str | os.PathLike) -> Iterator[Path]:
    """Hold ``DIR.lock`` (re-entrant within a process) while ``DIR`` is being produced;
    leftovers of a killed writer (staging or set-aside directories) are cleaned up first.
    Yields the absolute ``DIR``."""
    final = _abs(path)
    lock = lock_path(final)
    if lock not in _HELD:
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"{final}: cannot create its parent ({_reason(exc)})") from None
        _acquire(lock, final)
        _HELD[lock] = 0
        _recover(final)
    _HELD[lock] += 1
    try:
        yield final
    finally:
        _HELD[lock] -= 1
        if not _HELD[lock]:
            del _HELD[lock]
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()


def _siblings(final: Path, kind: str) -> list[Path]:
    return sorted(final.parent.glob(f".{final.name}.{kind}-*"))


def _recover(final: Path) -> None:
    """Under the lock: a killed writer's staging directories go; a set-aside old set comes
    back if the new one never made it into place, else it goes."""
    for tmp in _siblings(final, "tmp"):
        shutil.rmtree(tmp, ignore_errors=True)
    for old in _siblings(final, "old"):
        if not final.exists():
            os.rename(old, final)
        else:
            shutil.rmtree(old, ignore_errors=True)


# --------------------------------------------------------------------------- the set


def _fsync_path(path: Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def write_manifest(staging: Path, info: Mapping[str, Any]) -> Path:
    """``manifest.json``: ``info`` (command, argv, seed, inputs) plus the schema, the package
    version and the size and sha256 of every file in ``staging``."""
    files = {p.relative_to(staging).as_posix(): {"bytes": p.stat().st_size,
                                                 "sha256": sha256_file(p)}
             for p in _files(staging) if p.name != MANIFEST or p.parent != staging}
    doc = {"schema": MANIFEST_SCHEMA, "version": package_version(), **dict(info),
           "files": files}
    path = staging / MANIFEST
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def verify_manifest(final: str | os.PathLike) -> list[str]:
    """Problems of an output set against its manifest (missing, extra or changed files);
    empty when the set is whole."""
    root = Path(final)
    doc = json.loads((root / MANIFEST).read_text())
    want = doc["files"]
    have = {p.relative_to(root).as_posix(): p for p in _files(root)}
    have.pop(MANIFEST, None)
    problems = [f"{n}: missing" for n in sorted(set(want) - set(have))]
    problems += [f"{n}: not in the manifest" for n in sorted(set(have) - set(want))]
    problems += [f"{n}: sha256 differs" for n in sorted(set(want) & set(have))
                 if sha256_file(have[n]) != want[n]["sha256"]]
    return problems


def _swap_in(staging: Path, final: Path, token: str) -> None:
    """Rename ``staging`` to ``final``; an existing ``final`` is set aside first and removed
    after."""
    old = None
    if final.exists():
        old = final.parent / f".{final.name}.old-{os.getpid()}-{token}"
        os.rename(final, old)
    os.rename(staging, final)
    _fsync_path(final.parent, directory=True)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def output_set(path: str | os.PathLike, manifest: Mapping[str, Any] | None = None,
               legacy: Iterable[str] = ()) -> Iterator[Path]:
    """Yield a fresh staging directory to write the set into; on a clean exit the manifest is
    written last and the set renamed into ``path`` (replacing an earlier set as a whole). On
    an exception nothing in ``path`` changes and the staging directory is removed."""
    with output_lock(path) as final:
        check_output_dir(final, legacy)
        token = secrets.token_hex(4)
        staging = final.parent / f".{final.name}.tmp-{os.getpid()}-{token}"
        try:
            staging.mkdir()
            yield staging
            write_manifest(staging, manifest or {})
            for p in _files(staging):
                _fsync_path(p)
            _fsync_path(staging, directory=True)
            _swap_in(staging, final, token)
        except OSError as exc:
            raise OutputError(f"{exc.filename or final}: writing the output set {final} "
                              f"failed ({exc.strerror or exc}); {final} is unchanged") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def write_file_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary sibling, fsync, rename: a reader sees
    the old file or the new one, never a part."""
    final = _abs(path)
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        with open(tmp, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise OutputError(f"{final}: cannot write ({exc.strerror or exc})") from None
    return final
