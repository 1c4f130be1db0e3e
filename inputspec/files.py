"""Reading an input file, bounded: a regular file only, its size checked before a byte is read.

``os.stat`` says what the path is before it is opened, so a named pipe, a device (``/dev/zero``,
``/dev/full``), a socket or a directory is refused without blocking or reading; the file is
then opened non-blocking and read at most ``max_bytes + 1`` bytes, so a file that grows (or a
``/proc`` file that reports size 0) is still bounded. Every ``OSError`` names the path.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from inputspec.errors import InputError

#: Input files larger than this are refused before reading (traces pass their own cap).
MAX_FILE_BYTES = 64 * 2**20
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))
_O_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def os_problem(exc: OSError) -> str:
    """An ``OSError`` in words without the path (the caller names it): 'permission denied'."""
    text = exc.strerror or type(exc).__name__
    return f"cannot be read: {text[:1].lower()}{text[1:]}" + (
        f" (errno {exc.errno})" if exc.errno else "")


def file_kind(mode: int) -> str | None:
    """What a non-regular file is ("a named pipe"), or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_regular(path: str | Path, what: str = "input") -> os.stat_result:
    """The ``stat`` of ``path`` when it is an existing regular file; else an :class:`InputError`
    (missing, a directory, a pipe, a device) naming it. Symbolic links are followed."""
    source = f"{what} file {path}"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(source, problem="does not exist") from None
    except OSError as exc:
        raise InputError(source, problem=os_problem(exc)) from None
    kind = file_kind(st.st_mode)
    if kind is not None:
        raise InputError(source, problem=f"is not a regular file ({kind}); give the path of "
                         "a file")
    return st


def _too_big(source: str, size: int, max_bytes: int, exact: bool = True) -> InputError:
    what = f"is {size:,} bytes" if exact else f"holds more than {max_bytes:,} bytes"
    return InputError(source, problem=f"{what}, more than the {max_bytes:,} bytes an input "
                      "file may have")


def read_bytes(path: str | Path, what: str = "input", *,
               max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of regular file ``path``, at most ``max_bytes``; anything else refused."""
    source = f"{what} file {path}"
    st = check_regular(path, what)
    if st.st_size > max_bytes:
        raise _too_big(source, st.st_size, max_bytes)
    try:
        fd = os.open(path, _O_FLAGS)
        with os.fdopen(fd, "rb") as fh:
            kind = file_kind(os.fstat(fh.fileno()).st_mode)  # replaced since the stat
            if kind is not None:
                raise InputError(source, problem=f"is not a regular file ({kind})")
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(source, problem=os_problem(exc)) from None
    if len(raw) > max_bytes:
        raise _too_big(source, len(raw), max_bytes, exact=False)
    return raw


def read_text(path: str | Path, what: str = "input", *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of ``path`` (a byte-order mark dropped); missing, oversized, non-regular
    or non-UTF-8 files are refused naming the file."""
    raw = read_bytes(path, what, max_bytes=max_bytes)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} file {path}", problem=f"is not UTF-8 text (byte "
                         f"0x{raw[exc.start]:02x} at offset {exc.start}); save it as UTF-8") \
            from None
    return text[1:] if text.startswith("\ufeff") else text


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` (UTF-8); an ``OSError`` (a full disk, a file-size limit)
    carries the path, which a failed ``write`` or ``close`` alone does not."""
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise type(exc)(exc.errno, exc.strerror or str(exc), str(path)) from None
    return Path(path)
