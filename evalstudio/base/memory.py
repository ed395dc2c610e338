"""Give freed memory back to the operating system.

Reading a large file through Arrow and pandas frees most of what it allocated (the text of every cell, the
intermediate columns), but the allocators keep the freed pages for later: Arrow's memory pool (mimalloc or
jemalloc) and glibc's malloc both do. The analysis that follows allocates through numpy, which cannot reuse
Arrow's pool, so the process would hold both. After reading 1M ratings and 3.3M metric scores the process held
about 830 MB, of which about 300 MB were such freed pages (benchmarks/analysis.py; docs/benchmarks.md).
"""

from __future__ import annotations

import ctypes

_M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)


def use_returning_allocator(arenas: int = 2) -> None:
    """Allocate so that freed memory goes back to the system, for a process that reads a large file and then
    analyses it on a few threads (the `analyze` command sets it; process-wide, so never on import):

    - Arrow allocates through jemalloc, which gives freed pages back, instead of its default mimalloc, which keeps
      them (the analysis of 1M ratings peaked at 1.28 GB instead of 1.52 GB), and jemalloc gives them back at
      once instead of 10 s later (its decay time): reading the benchmark's files peaked at 713 MB instead of
      840 MB and left 519 MB instead of 718 MB (benchmarks/analysis.py).
    - glibc's malloc keeps at most `arenas` arenas. By default each thread that allocates under contention gets an
      arena of its own (up to 8 per core), and memory freed in one is not reused by another: with the
      meta-evaluation's two threads and the ratings' thread beside them, the analysis held about 150 MB more at
      its peak, in the same time.

    Each part is skipped where it does not apply (a pyarrow built without jemalloc, a C library without
    mallopt)."""
    try:
        import pyarrow as pa
    except ImportError:
        pa = None
    if pa is not None:
        try:
            pa.set_memory_pool(pa.jemalloc_memory_pool())
            pa.jemalloc_set_decay_ms(0)
        except (AttributeError, NotImplementedError):  # ArrowNotImplementedError is a NotImplementedError
            pass
    mallopt = _libc("mallopt")
    if mallopt is not None:
        mallopt(_M_ARENA_MAX, int(arenas))


def _libc(name: str):
    """A function of the process's own C library (glibc's malloc_trim, mallopt), or None where it has none."""
    try:
        return getattr(ctypes.CDLL(None), name, None)
    except OSError:
        return None


def release_freed_memory() -> None:
    """Return the pages Arrow's pool and glibc's malloc hold free to the system; a no-op where neither applies
    (another C library, or pyarrow not installed)."""
    try:
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except (ImportError, AttributeError):
        pass
    trim = _libc("malloc_trim")  # glibc's, where the C library is glibc
    if trim is not None:
        trim(0)
