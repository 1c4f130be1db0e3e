"""Keep freed heap memory in the process while bulk array work runs (glibc only).

Load-mode all-to-alls route tens of millions of QPs in chunks; each chunk allocates and frees
arrays of a few MB. glibc hands such blocks back to the kernel on free (``mmap`` above the
mmap threshold, heap trimming above the trim threshold), so every chunk page-faults its
memory in again: at 16,384 GPUs that was a third of the CPU time, all of it system time
(issue 28). Raising both thresholds keeps the blocks in the heap for reuse. The setting is
process-wide and only changes when memory goes back to the kernel, never a computed value.
"""

from __future__ import annotations

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4  # glibc malloc.h
#: glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX): blocks up to it
#: come from the heap.
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
#: Free memory at the top of the heap kept before trimming.
TRIM_THRESHOLD_BYTES = 512 * 1024 * 1024

_level = 0  # 1: thresholds raised; 2: and no block mmapped


def retain_freed_memory(large: bool = False) -> bool:
    """Raise glibc's mmap and trim thresholds once per process; False where there is no
    glibc ``mallopt`` (other C libraries: nothing changes).

    ``large``: blocks above the largest mmap threshold come from the heap too (``M_MMAP_MAX``
    0: glibc mmaps no block), so that arrays of tens of MB freed by one flow-engine
    allocation are reused by the next instead of faulted in again (the QP step of
    ``recommend`` at 12,288 GPUs builds incidences of 6 M entries per send round, and spent
    about a third of its CPU in system time). Freed blocks inside the heap then stay with the
    process and are reused."""
    global _level
    want = 2 if large else 1
    if _level >= want:
        return True
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
    ok = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1 and ok
    if large:
        ok = mallopt(_M_MMAP_MAX, 0) == 1 and ok
    if ok:
        _level = want
    return ok
