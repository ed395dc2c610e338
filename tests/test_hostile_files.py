"""Hostile files and folders rather than hostile records: a config or projects.yaml that is a device, a FIFO, a
folder or a huge file, an output folder that is a symbolic link, a refused output half-written. (Hostile records:
tests/test_hostile_inputs.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import ROOT


def _special_file(tmp_path, kind: str) -> Path:
    if kind == "device":
        return Path("/dev/zero")
    if kind == "fifo":
        path = tmp_path / "pipe"
        os.mkfifo(path)
        return path
    if kind == "folder":
        return tmp_path
    path = tmp_path / "huge.xml"  # sparse: 9 MB without writing them
    with open(path, "wb") as f:
        f.truncate(9 * 1024 * 1024)
    return path


@pytest.mark.parametrize("kind, message", [("device", "not a regular file"), ("fifo", "not a regular file"),
                                           ("folder", "not a regular file"), ("huge", "larger than 8 MB")])
@pytest.mark.parametrize("where", ["config", "projects"])
def test_a_config_or_projects_file_that_is_no_small_regular_file_is_refused_at_once(tmp_path, kind, message, where):
    """`config: /dev/zero` was read until the out-of-memory killer stopped the process, and a FIFO hung it: only
    regular files of at most 8 MB are read, each refused in one line naming the file."""
    import subprocess
    import sys

    from .test_cli import _projects_file

    special = _special_file(tmp_path, kind)
    if where == "config":
        projects = _projects_file(tmp_path, lambda raw: raw["projects"]["dialogue"].__setitem__("config", str(special)))
        named = f"projects.dialogue.config: cannot read {special}: {message}"
    else:
        projects, named = special, f"cannot read {special}: {message}"
    done = subprocess.run([sys.executable, "-m", "evalstudio.cli", "projects", "--projects", str(projects)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and named in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_an_output_folder_that_is_a_symbolic_link_is_refused_and_its_target_untouched(tmp_path):
    """`analyze -o LINK` followed the link and overwrote an index.html where it pointed."""
    from .test_cli import run

    ratings = tmp_path / "ratings.csv"
    ratings.write_text("item,annotator,criterion,value\n1,a,quality,4\n1,b,quality,5\n2,a,quality,2\n2,b,quality,3\n"
                       "3,a,quality,1\n3,b,quality,1\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "index.html").write_text("mine", encoding="utf-8")
    (tmp_path / "out").symlink_to(elsewhere)
    done = run("analyze", str(ratings), "-o", str(tmp_path / "out"), "--bootstrap", "0")
    assert done.returncode == 2 and "is a symbolic link" in done.stderr, done.stderr
    assert [p.name for p in elsewhere.iterdir()] == ["index.html"] and (elsewhere / "index.html").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "out", "ratings.csv"]  # no staging left
    fine = run("analyze", str(ratings), "-o", str(tmp_path / "real"), "--bootstrap", "0")
    assert fine.returncode == 0, fine.stderr
    assert (tmp_path / "real" / "index.html").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "out", "ratings.csv", "real"]


def test_a_refused_output_leaves_nothing_behind(tmp_path):
    """An analysis or report refused half-way (e.g. a report of prefilled answers) leaves none of its files: the
    folder is written whole or not at all, and an earlier complete one stays as it was."""
    from evalstudio.base.errors import EvalstudioError
    from evalstudio.base.files import staged_folder, write_output

    out = tmp_path / "report"
    with pytest.raises(EvalstudioError):
        with staged_folder(out) as stage:
            write_output(stage / "agreement.csv", "a,b\n")
            raise EvalstudioError("refused after the first file")
    assert list(tmp_path.iterdir()) == []
    with staged_folder(out) as stage:
        write_output(stage / "index.html", "complete")
    with pytest.raises(EvalstudioError):
        with staged_folder(out) as stage:
            write_output(stage / "index.html", "half")
            raise EvalstudioError("refused")
    assert [p.name for p in tmp_path.iterdir()] == ["report"] and (out / "index.html").read_text() == "complete"
