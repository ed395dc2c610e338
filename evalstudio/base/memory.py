"""Give freed memory back to the operating system.

Reading a large file through Arrow and pandas frees most of what it allocated (the text of every cell, the
intermediate columns), but the allocators keep the freed pages for later: Arrow's memory pool (mimalloc or
jemalloc) and glibc's malloc both do. The analysis that follows allocates through numpy, which cannot reuse
Arrow's pool, so the process would hold both. After reading 1M ratings and 3.3M metric scores the process held
about 830 MB, of which about 300 MB were such freed pages (benchmarks/analysis.py; docs/benchmarks.md).
"""

from __future__ import annotations

import ctypes


def use_returning_allocator() -> None:
    """Let Arrow allocate through jemalloc, which gives freed pages back to the system after a short delay,
    instead of its default mimalloc, which keeps them: the analysis of 1M ratings peaked at 1.28 GB instead of
    1.52 GB, in the same time (benchmarks/analysis.py). Process-wide, so set by the `analyze` command, not on
    import; a pyarrow built without jemalloc keeps its pool."""
    try:
        import pyarrow as pa
    except ImportError:
        return
    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except (AttributeError, NotImplementedError):  # ArrowNotImplementedError is a NotImplementedError
        pass


def release_freed_memory() -> None:
    """Return the pages Arrow's pool and glibc's malloc hold free to the system; a no-op where neither applies
    (another C library, or pyarrow not installed)."""
    try:
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except (ImportError, AttributeError):
        pass
    try:  # the process's own symbols: glibc's malloc_trim where the C library is glibc
        trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:
        trim = None
    if trim is not None:
        trim(0)
