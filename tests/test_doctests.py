"""The examples in the docstrings run (issue 53: doctests were not part of the suite). Each statistic's doctest
reproduces a published value (Krippendorff's 2011 example, Fleiss' kappa's worked example, ppi-python's numbers),
so a change that moves one fails here, in the README's test command."""

from __future__ import annotations

import doctest
import importlib

import pytest

from .test_layering import modules

WITH_EXAMPLES = sorted(name for name, path in modules().items() if ">>>" in path.read_text(encoding="utf-8"))


def test_the_statistics_have_examples():
    assert {"evalstudio.stats.agreement", "evalstudio.stats.ppi", "evalstudio.stats.active",
            "evalstudio.stats.pac"} <= set(WITH_EXAMPLES)


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_the_examples_of_each_module_run(name):
    failed, tried = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried > 0 and failed == 0, f"{name}: {failed} of {tried} examples failed (run pytest --doctest-modules)"
