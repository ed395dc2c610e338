"""Turn the published HANNA file into the two tables `evalstudio analyze` reads.

HANNA (Chhun et al., COLING 2022, "Of Human Criteria and Automatic Metrics: A Benchmark of the Evaluation of Story
Generation") publishes `hanna_metric_scores.csv`: one row per system, one column per human criterion and per automatic
metric, each cell a JSON list of 96 scores (one per WritingPrompts prompt). The human cells hold the mean of the
3 MTurk ratings of each story. This script writes

  ratings.csv   item, system, annotator, Relevance, ..., Complexity   (one row per story; layout wide_criteria)
  metrics.csv   item, system, metric, value                           (one row per story and metric)

without the `Human` row (the reference stories), as the paper's correlations do; metric names lose the paper's
category marks (`BLEU Ξ§` -> `BLEU`). `--metrics all` keeps all 72 metrics; the default keeps the 17 the paper
discusses (its METRICS_FILTERED).

    python examples/analyze/hanna/prepare.py -o /tmp/hanna
    evalstudio analyze /tmp/hanna/ratings.csv --metrics /tmp/hanna/metrics.csv \\
        --spec examples/analyze/hanna/hanna.yaml -o /tmp/hanna/report
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
PUBLISHED = HERE / "published" / "hanna_metric_scores.csv"
CRITERIA = ["Relevance", "Coherence", "Empathy", "Surprise", "Engagement", "Complexity"]
# the paper's METRICS_FILTERED (data_visualization.ipynb), without their category marks
PAPER_METRICS = ["BLEU", "ROUGE-1 Recall", "METEOR", "chrF", "ROUGE-WE-3 Recall", "BERTScore Recall", "MoverScore",
                 "DepthScore", "BaryScore-W", "S3-Pyramid", "SummaQA", "InfoLM-FisherRao", "BARTScore-SH",
                 "Coverage", "Repetition-1", "SUPERT-PS", "BLANC-Tune-PS"]
HUMAN_ANNOTATOR = "mean of 3 MTurk raters"


def metric_name(column: str) -> str:
    """'BERTScore F1 Ξε' -> 'BERTScore F1': the last word is the paper's category mark, not part of the name."""
    head, _, mark = column.rpartition(" ")
    return head if head and not mark.isascii() else column


def tables(published: Path = PUBLISHED, metrics: str = "paper") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(ratings in layout wide_criteria, metrics in the long layout) from the published wide file."""
    wide = pd.read_csv(published, index_col="Model").drop(index="Human")
    cells = {col: wide[col].map(json.loads) for col in wide.columns}
    ratings, scores = [], []
    for system in wide.index:
        n = len(cells[CRITERIA[0]][system])
        for item in range(n):
            row = {"item": item, "system": system, "annotator": HUMAN_ANNOTATOR}
            row.update({c: cells[c][system][item] for c in CRITERIA})
            ratings.append(row)
        for col in wide.columns[len(CRITERIA):]:
            name = metric_name(col)
            if metrics == "paper" and name not in PAPER_METRICS:
                continue
            scores += [{"item": item, "system": system, "metric": name, "value": v}
                       for item, v in enumerate(cells[col][system])]
    return pd.DataFrame(ratings), pd.DataFrame(scores)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--out", type=Path, required=True, help="folder for ratings.csv and metrics.csv")
    parser.add_argument("--metrics", choices=["paper", "all"], default="paper",
                        help="the 17 metrics the paper discusses (default) or all 72")
    args = parser.parse_args(argv)
    ratings, scores = tables(metrics=args.metrics)
    args.out.mkdir(parents=True, exist_ok=True)
    ratings.to_csv(args.out / "ratings.csv", index=False)
    scores.to_csv(args.out / "metrics.csv", index=False)
    print(f"{len(ratings)} stories ({ratings['system'].nunique()} systems x {ratings['item'].nunique()} prompts), "
          f"{scores['metric'].nunique()} metrics -> {args.out}")


if __name__ == "__main__":
    main()
