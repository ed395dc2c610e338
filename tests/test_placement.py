"""benchmarks/placement.py: `--cpus ROLE=CPUS` of benchmarks/gateway.py read as given, or refused with the fix."""

import importlib.util

import pytest

from .conftest import ROOT

spec = importlib.util.spec_from_file_location("placement", ROOT / "benchmarks" / "placement.py")
placement = importlib.util.module_from_spec(spec)
spec.loader.exec_module(placement)


@pytest.mark.parametrize("specs, expected", [
    (["gateway=0", "label-studio=1"], {"gateway": {0}, "label-studio": {1}}),
    (["postgresql=0,1", "participants=0-1"], {"postgresql": {0, 1}, "participants": {0, 1}}),
    ([], {}),
])
def test_placement_read(specs, expected):
    assert placement.parse(specs, 2) == expected


@pytest.mark.parametrize("specs, message", [
    (["ledger=0"], "role 'ledger' is not one of"),
    (["gateway=2"], "this machine has CPUs 0-1"),
    (["gateway=x"], "is not a CPU number or range"),
    (["gateway="], "is not a CPU number or range"),
    (["gateway=0", "gateway=1"], "placed twice"),
])
def test_placement_refused(specs, message):
    with pytest.raises(ValueError, match=message):
        placement.parse(specs, 2)
