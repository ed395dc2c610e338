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
    assert {"evalstudio/projects.yaml", "evalstudio/importers/sotopia.py", "evalstudio/labeling_configs/health.xml",
            "evalstudio/labeling_configs/squality.xml", "evalstudio/templates/pairwise/config.xml",
            "evalstudio/templates/slider/example.csv"} <= names
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
    for name in ("sotopia", "cmv", "circa", "dialogue", "health", "squality", "squality_pairwise"):
        assert name in listing
    # a protocol of one's own from a template, with the installed package alone
    made = subprocess.run([bin_dir / "evalstudio", "new", "mine", "--template", "pairwise"], cwd=workdir,
                          capture_output=True, text=True, env={"COLUMNS": "200", "PATH": str(bin_dir)})
    assert made.returncode == 0, made.stdout + made.stderr
    checked = subprocess.run([bin_dir / "evalstudio", "validate", "mine", "examples/mine/example.jsonl"], cwd=workdir,
                             capture_output=True, text=True, env={"COLUMNS": "200", "PATH": str(bin_dir)})
    assert checked.returncode == 0 and "4 valid task(s)" in checked.stdout, checked.stdout + checked.stderr
