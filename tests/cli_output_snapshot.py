"""Issue 66's check that moving code changed no output: runs the main offline commands on the demo's and the tests'
data and writes one snapshot folder (each command's exit code, stdout, stderr and every file it wrote). Run it
before and after a change with the same work folder, then diff the two snapshots:

    python tests/cli_output_snapshot.py /tmp/work before/   # on the old code
    python tests/cli_output_snapshot.py /tmp/work after/    # on the new code
    diff -r before/ after/

SNAPSHOT_PYTHONPATH=DIR runs the commands on a copy of the package in DIR instead (e.g. the old code's, with
exporters/, importers/, ml_backend/ and labeling_configs/ inside evalstudio/); the report's generation time is
written as "(time)" and the work folder as "(work)". Not collected by pytest (no test_ prefix): a tool for a refactoring."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def export_file(work: Path) -> tuple[Path, Path]:
    """tests/test_study.py's dialogue study (60 tasks, four participants) as a Label Studio JSON export, and the
    projects.yaml with its crowd rules."""
    from tests.test_cli import _projects_file
    from tests.test_study import make_tasks

    from evalstudio.protocols import registry
    from evalstudio.protocols.registry import Bonus

    project = registry.load(ROOT / "projects.yaml").entry("dialogue")
    crowd = project.crowd.model_copy(update={"min_gold_accuracy": 0.5, "bonus": Bonus(rule="all_batches", amounts=[2.5])})
    rows = [{"item1": f"w{t % 9}", "item2": f"w{(t + 1) % 9}", "item3": f"w{(t + 3) % 9}", "item4": f"w{(t + 5) % 9}",
             "annotator": f"a{t % 3}", "best": f"w{t % 9}", "worst": f"w{(t + 5) % 9}"} for t in range(27)]
    (work / "bws.csv").write_text("item1,item2,item3,item4,annotator,best,worst\n" + "".join(
        ",".join(r.values()) + "\n" for r in rows), encoding="utf-8")
    export = work / "export.json"
    export.write_text(json.dumps(make_tasks(project.model_copy(update={"crowd": crowd}))), encoding="utf-8")

    def crowd_rules(raw):
        raw["projects"]["dialogue"]["crowd"].update({"min_gold_accuracy": 0.5, "bonus": {"rule": "all_batches",
                                                                                           "amounts": [2.5]}})
    return export, _projects_file(work, crowd_rules)


def commands(work: Path, export: Path) -> dict[str, list[str]]:
    """The commands compared: name -> arguments."""
    ex, data, out = ROOT / "examples", ROOT / "tests" / "data", work / "out"
    usr, meta = data / "usr", data / "metaeval"
    found = {
        "projects": ["projects"],
        "help": ["--help"],
        "export": ["export", "dialogue", "--from-export", str(export), "-o", str(out / "export.csv")],
        "export-faulty": ["export", "dialogue", "--from-export", str(ex / "dialogue" / "mts_next_response.jsonl"),
                          "-o", str(out / "x.csv")],
        "status": ["status", "dialogue", "--from-export", str(export), "-o", str(out / "status")],
        "approvals": ["approvals", "dialogue", "--from-export", str(export), "--platform", "prolific", "-o",
                      str(out / "approvals")],
        "report": ["report", "dialogue", "--from-export", str(export), "--bootstrap", "5", "-o", str(out / "report")],
        "report-rejected": ["report", "dialogue", "--from-export", str(export), "--exclude-rejected", "--bootstrap",
                            "5", "-o", str(out / "report-rejected")],
        "analyze-circa": ["analyze", str(data / "circa_mturk_final_results.csv"), "--spec",
                          str(ex / "analyze" / "circa_mturk.yaml"), "--bootstrap", "50", "-o", str(out / "circa")],
        "analyze-metaeval": ["analyze", str(meta / "synthetic_ratings.csv"), "--metrics",
                             str(meta / "synthetic_metrics.csv"), "--spec", str(meta / "synthetic.yaml"),
                             "--bootstrap", "50", "-o", str(out / "metaeval")],
        "analyze-missing": ["analyze", str(work / "nothing.csv"), "-o", str(out / "nothing")],
        "analyze-pairwise": ["analyze", str(ex / "analyze" / "squality" / "rank_comparisons.csv"), "--spec",
                             str(ex / "analyze" / "squality" / "rank_comparisons.yaml"), "--bootstrap", "20", "-o",
                             str(out / "pairwise")],
        "analyze-best-worst": ["analyze", str(work / "bws.csv"), "--bootstrap", "20", "-o", str(out / "bws")],
        "approvals-mturk": ["approvals", "dialogue", "--from-export", str(export), "--platform", "mturk", "-o",
                            str(out / "approvals-mturk")],
        "plan": ["plan", str(usr / "pc_usr_data.json"), "--spec", str(usr / "overall.yaml"), "--system",
                 "Original Ground Truth", "--system", "Seq2Seq", "--delta", "0.3", "--agreement-width", "0.2",
                 "-o", str(out / "plan")],
        "publish-ratings": ["publish", "--ratings", str(data / "circa_mturk_final_results.csv"), "--spec",
                            str(ex / "analyze" / "circa_mturk.yaml"), "-o", str(out / "publish"), "--key-file",
                            str(work / "key"), "--bootstrap", "50"],
        "compare": ["compare", str(out / "publish"), str(out / "publish"), "-o", str(out / "compare")],
        "new": ["new", "my_study", "--template", "likert", "--dir", str(out / "new")],
        "judge-unreachable": ["judge", "dialogue", "--model", "m", "--base-url", "http://127.0.0.1:23999/v1", "-o",
                              str(out / "judge")],
    }
    for protocol in ("dialogue", "sotopia", "circa_part1", "cmv", "health", "squality", "squality_pairwise", "mqm",
                     "esa"):
        folder = protocol.split("_part")[0]
        files = sorted((ex / folder).glob("*.*"))
        found[f"validate-{protocol}"] = ["validate", protocol, *map(str, files[:1])]
    return found


def main(work: Path, snapshot: Path) -> None:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    (work / "key").write_text("ab" * 32, encoding="utf-8")
    (work / "out").mkdir()
    export, projects = export_file(work)
    env = {**os.environ, "PYTHONPATH": os.environ.get("SNAPSHOT_PYTHONPATH", ""), "COLUMNS": "200", "EVALSTUDIO_PROJECTS": str(projects), "LABEL_STUDIO_URL": "http://127.0.0.1:1",
           "LABEL_STUDIO_API_KEY": "x", "OPENAI_API_KEY": "x", "PYTHONHASHSEED": "0"}
    for name, args in commands(work, export).items():
        done = subprocess.run([sys.executable, "-m", "evalstudio.cli", *args], capture_output=True, text=True,
                              cwd=work, env=env, timeout=600)
        said = f"exit {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}"
        (snapshot / f"{name}.out").write_text(said.replace(str(work), "(work)"), encoding="utf-8")
        print(name, done.returncode, flush=True)
    files = snapshot / "files"
    shutil.rmtree(files, ignore_errors=True)
    shutil.copytree(work / "out", files)
    for page in files.rglob("*"):  # the report says when it was generated; the work folder may be another
        if page.suffix in (".html", ".csv", ".json", ".md", ".yaml", ".jsonl", ".txt"):
            text = page.read_text(encoding="utf-8").replace(str(work), "(work)")
            page.write_text(re.sub(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "generated (time) UTC", text),
                            encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
