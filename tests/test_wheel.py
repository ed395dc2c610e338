"""The built wheel installs in a fresh virtualenv and works without the repository."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile

from .conftest import ROOT


def test_wheel_installs_and_runs(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dist), str(ROOT)],
                   check=True, capture_output=True, timeout=600)
    [wheel] = dist.glob("evalstudio-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"evalstudio/projects.yaml", "evalstudio/importers/sotopia.py", "evalstudio/labeling_configs/health.xml"} <= names
    assert not any(n.split("/")[0] in {"importers", "exporters", "ml_backend", "labeling_configs", "tests"} for n in names)

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    # --no-compile: the check is that it installs and runs; byte-compiling every dependency only costs time
    subprocess.run([bin_dir / "pip", "install", "-q", "--no-compile", str(wheel)], check=True, capture_output=True,
                   timeout=900)
    workdir = tmp_path / "elsewhere"  # no projects.yaml here: the packaged copy is used
    workdir.mkdir()
    help_text = subprocess.run([bin_dir / "evalstudio", "--help"], cwd=workdir, check=True, capture_output=True, text=True).stdout
    assert "import" in help_text and "validate" in help_text
    listing = subprocess.run([bin_dir / "evalstudio", "projects"], cwd=workdir, check=True, capture_output=True, text=True,
                             env={"COLUMNS": "200", "PATH": str(bin_dir)}).stdout
    for name in ("sotopia", "cmv", "circa", "dialogue", "health"):
        assert name in listing
