"""The fault campaign of benchmarks/faults.py, short (1.5 minutes of arrivals and faults instead of 20): two gateway
processes on a PostgreSQL ledger, one behind a link that is cut, Label Studio frozen, gateways and the sync lease
holder killed with SIGKILL, tasks imported and participants closed while participants work; every invariant it
prints holds. (The 20-minute runs and their tables: docs/operating.md.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import DATABASES

ROOT = Path(__file__).resolve().parents[1]
INVARIANTS = 5

pytestmark = [pytest.mark.server,
              pytest.mark.skipif("postgresql" not in DATABASES, reason="the campaign's ledger is in PostgreSQL")]


@pytest.mark.parametrize("seed", [7])
def test_a_short_fault_campaign_keeps_every_invariant(seed):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "faults.py"), "--minutes", "1.5", "--seed",
                           str(seed), "--ports", "auto"], capture_output=True, text=True, cwd=ROOT, timeout=3600)
    said = done.stdout + done.stderr[-5000:]
    rows = re.findall(r"^(\S.{71})\s+(\d+)\s+(\d+)$", done.stdout, flags=re.M)
    assert len(rows) == INVARIANTS, said
    assert all(int(broken) == 0 for _, _, broken in rows), said
    assert done.returncode == 0, said
    for kind in ("frozen (SIGSTOP)", "killed (SIGKILL)", "tasks imported", "cut off from the ledger"):
        assert kind in done.stdout, said  # every kind of fault happened
