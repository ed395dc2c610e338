"""evalstudio/base/memory.py: what `analyze` sets so that the memory it frees goes back to the system, checked by
its effect in a child process of its own (the settings are process-wide): Arrow's pool is jemalloc and returns
freed pages at once, and glibc's malloc keeps at most the arenas asked for however many threads allocate."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pandas as pd
import pytest


def _run(code: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=120)
    if done.returncode != 0:
        raise AssertionError(done.stderr[-2000:])
    return done.stdout.strip()


_KEPT = """
    import sys
    import pyarrow as pa
    import pyarrow.csv as pcsv
    from evalstudio.base.memory import release_freed_memory, use_returning_allocator

    def anonymous_mb():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("RssAnon"))

    if sys.argv[2] == "returning":
        use_returning_allocator()
    else:  # jemalloc keeping what is freed (no decay at all: what it keeps does not depend on time)
        pa.set_memory_pool(pa.jemalloc_memory_pool())
        pa.jemalloc_set_decay_ms(-1)
    print(pa.default_memory_pool().backend_name)
    before = anonymous_mb()
    table = pcsv.read_csv(sys.argv[1])  # Arrow's reader, on its threads
    read = anonymous_mb() - before
    del table
    # the reader's threads may still hold the last buffers for a moment (on a busy machine 26 of 26 MB, 1 run in 12):
    # wait for the state, every buffer given back to the pool, not for a time
    import time
    deadline = time.monotonic() + 60
    while pa.default_memory_pool().bytes_allocated() > 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    if pa.default_memory_pool().bytes_allocated() > 0:
        sys.exit("Arrow's pool still holds %d bytes a minute after the table was freed"
                 % pa.default_memory_pool().bytes_allocated())
    if sys.argv[2] == "returning":
        release_freed_memory()  # as the readers do once a file is read (evalstudio/readers/ratings.py)
    print(read, anonymous_mb() - before)
"""


def test_arrow_gives_back_what_reading_freed_at_once(tmp_path):
    """Reading a CSV file through Arrow, then freeing the table: with `use_returning_allocator` and the release the
    readers make after reading, the pages go back; jemalloc told to keep freed pages keeps them (so the test can
    tell). Nothing here depends on time: jemalloc's decay (pages given back over some seconds, or at once with a
    decay of 0 in the arenas made after it is set) gave 0.27 to 0.37 on a quiet machine and 1.0 under load."""
    pytest.importorskip("pyarrow")
    path = tmp_path / "scores.csv"
    n = 1_000_000
    pd.DataFrame({"item": range(n), "system": "S1", "metric": [f"m{i % 10}" for i in range(n)],
                  "value": [i / 7 for i in range(n)]}).to_csv(path, index=False)
    try:
        backend, *_ = _run("import pyarrow as pa; pa.jemalloc_memory_pool(); print('jemalloc')").split()
    except AssertionError:
        pytest.skip("this pyarrow is built without jemalloc")
    kept = {}
    for mode in ("returning", "default"):
        backend, numbers = _run(_KEPT, str(path), mode).split("\n")
        assert backend == "jemalloc"
        read, left = map(float, numbers.split())
        kept[mode] = left / read
    assert kept["default"] > 0.7, kept  # the test can tell: kept, most of it stays
    assert kept["returning"] < 0.6, kept


_ARENAS = """
    import ctypes, os, re, sys, tempfile, threading
    from evalstudio.base.memory import use_returning_allocator

    if sys.argv[1] != "default":
        use_returning_allocator(arenas=int(sys.argv[1]))
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    start, done = threading.Barrier(7), threading.Barrier(7)

    def allocate():  # every thread allocates while the others are alive, as the analysis's threads do
        start.wait()
        block = libc.malloc(4096)
        done.wait()
        libc.free(block)

    threads = [threading.Thread(target=allocate) for _ in range(6)]
    for t in threads:
        t.start()
    start.wait()
    done.wait()
    for t in threads:
        t.join()
    with tempfile.NamedTemporaryFile(delete=False) as handle:
        path = handle.name
    out = libc.fopen(path.encode(), b"w")
    libc.malloc_info(0, out)
    libc.fclose(out)
    text = open(path).read()
    os.unlink(path)
    print(len(re.findall(r"<heap nr=", text)))
"""


def test_glibc_keeps_the_arenas_asked_for():
    """Six threads allocating at once: glibc gives each an arena of its own by default (memory freed in one is not
    reused by another); with `use_returning_allocator` there are at most the arenas asked for."""
    import ctypes

    if getattr(ctypes.CDLL(None), "malloc_info", None) is None:
        pytest.skip("not glibc")
    assert int(_run(_ARENAS, "default")) >= 6
    assert int(_run(_ARENAS, "2")) == 2
