"""The README's and the site's pictures of the report and of `analyze`, made from real published ratings:

  docs/report.png    `evalstudio report`'s page for Circa Part II, from the real MTurk explanation ratings
                     (tests/data/circa_mturk_final_results.csv: 12 workers, the T5 model's explanations)
  docs/analysis.png  `evalstudio analyze`'s page for HANNA (10 story generators, 17 metrics)
  docs/plan.png      `evalstudio plan`'s curves for USR's PersonaChat ratings (the README's worked example)
  docs/active.png    `evalstudio active estimate`'s figure for USR's Overall ratings, 200 of 300 responses drawn from
                     a proxy judge's uncertainty (the mean of the Natural, Context and Engaging ratings; its
                     confidence their agreement), as tests/test_active_command.py draws them

Run from the repository: `.venv/bin/python docs/screenshots.py` (needs /usr/bin/chromium, as the browser tests).
The annotator views (docs/sotopia.png, ...) come from the browser tests; see tests/test_browser.py."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from playwright.sync_api import sync_playwright

from evalstudio import importers
from evalstudio.exporters.payments.mturk import read_mturk_results
from evalstudio.exporters.analyses.report import build_report
from evalstudio.protocols import registry
from evalstudio.tasks.scanning import iter_tasks, split_task

ROOT = Path(__file__).resolve().parents[1]


def circa_report(out: Path) -> Path:
    project = registry.load(ROOT / "projects.yaml").entry("circa_part2")
    tasks = [{"id": i, **split_task(project, data)} for i, (_, data) in
             enumerate(iter_tasks(project, importers.get("circa"), [ROOT / "examples/circa/model_explanations.csv"]))]
    annotations, _ = read_mturk_results(ROOT / "tests/data/circa_mturk_final_results.csv", project, tasks,
                                        {"explanation_quality": "Answer.explanation-quality.label"})
    return build_report(project, tasks, out, annotations=annotations)


def hanna_analysis(out: Path) -> Path:
    hanna = ROOT / "examples/analyze/hanna"
    subprocess.run([sys.executable, hanna / "prepare.py", "-o", out], check=True)
    subprocess.run([sys.executable, "-m", "evalstudio.cli", "analyze", out / "ratings.csv", "--metrics",
                    out / "metrics.csv", "--spec", hanna / "hanna.yaml", "-o", out / "report"], check=True)
    return out / "report" / "index.html"


def usr_plan(out: Path) -> Path:
    """The README's `plan` example, with its curves (the page's pictures, one above the other)."""
    usr = ROOT / "tests/data/usr"
    subprocess.run([sys.executable, "-m", "evalstudio.cli", "plan", usr / "pc_usr_data.json", "--spec",
                    usr / "overall.yaml", "--system", "Original Ground Truth", "--system", "Seq2Seq", "--delta", "0.3",
                    "--agreement-width", "0.2", "-o", out], check=True, stdout=subprocess.DEVNULL)
    return out / "index.html"


def usr_active(out: Path) -> Path:
    """docs/active.md's `active draw` and `active estimate` on USR's Overall ratings, with a proxy judge."""
    out.mkdir(parents=True)
    data = json.loads((ROOT / "tests/data/usr/pc_usr_data.json").read_text(encoding="utf-8"))
    ratings, scores = [], []
    for k, context in enumerate(data):
        for r in context["responses"]:
            ratings += [{"item": f"c{k}", "system": r["model"], "annotator": a, "criterion": "Overall", "value": v}
                        for a, v in zip(context["annotators"], r["Overall"])]
            parts = [2 * np.mean(r[c]) - 1 for c in ("Natural", "Maintains Context", "Engaging")]
            scores.append({"item": f"c{k}", "system": r["model"], "metric": "proxy", "criterion": "Overall",
                           "value": np.mean(parts), "confidence": max(0.0, 1 - np.std(parts) / 2)})
    pd.DataFrame(scores).to_csv(out / "judge.csv", index=False)
    (out / "spec.yaml").write_text("name: usr\ncriteria:\n  Overall: {scale: interval, min: 1, max: 5}\n")
    cli = [sys.executable, "-m", "evalstudio.cli", "active"]
    subprocess.run(cli + ["draw", out / "judge.csv", "--metric", "proxy", "--budget", "200", "-o", out / "draws.csv"],
                   check=True, stdout=subprocess.DEVNULL)
    draws = pd.read_csv(out / "draws.csv")
    pd.DataFrame(ratings).merge(draws[draws["drawn"]][["system", "item"]]).to_csv(out / "drawn.csv", index=False)
    subprocess.run(cli + ["estimate", out / "drawn.csv", "--draws", out / "draws.csv", "--spec", out / "spec.yaml",
                          "-o", out / "active"], check=True, stdout=subprocess.DEVNULL)
    return out / "active" / "index.html"


def main() -> None:
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        for html, png in ((circa_report(Path(folder) / "circa"), "report.png"),
                          (hanna_analysis(Path(folder) / "hanna"), "analysis.png")):
            page.goto(html.resolve().as_uri())
            page.screenshot(path=ROOT / "docs" / png)
            print("wrote", ROOT / "docs" / png)
        page.goto(usr_plan(Path(folder) / "plan").resolve().as_uri())
        images = page.locator("img")
        for k in range(images.count()):
            images.nth(k).screenshot(path=ROOT / "docs" / f"plan-{k + 1}.png")
            print("wrote", ROOT / "docs" / f"plan-{k + 1}.png")
        page.goto(usr_active(Path(folder) / "active").resolve().as_uri())
        page.locator("img").first.screenshot(path=ROOT / "docs" / "active.png")
        print("wrote", ROOT / "docs" / "active.png")
        browser.close()


if __name__ == "__main__":
    main()
