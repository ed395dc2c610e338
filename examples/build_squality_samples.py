"""Builds the SQuALITY samples from a clone of nyu-mll/SQuALITY (commit dc08d4f574639d773bc64ef3ab3527043108fb4e).

    git clone https://github.com/nyu-mll/SQuALITY && git -C SQuALITY checkout dc08d4f
    python examples/build_squality_samples.py SQuALITY

Writes, from the published human evaluation (data/human-eval/all-responses.jsonl: 100 questions about 20
Project Gutenberg stories, each with three responses, bart, bart-dpr and human, each rated 0-100 for
correctness, selection and overall and ranked 1-3 by the same three reviewers) and the stories
(data/v1-3/txt/{train,dev,test}.jsonl):

  examples/squality/responses.jsonl      the questions of the first two stories (by id) with their story and responses
                                         (the input of the squality and squality_pairwise protocols)
  examples/analyze/squality/ratings.csv  every reviewer's three ratings of every response (item, system, annotator,
                                         criterion, value): `evalstudio analyze` input
  examples/analyze/squality/rank_comparisons.csv  every reviewer's overall ranking of a question's three responses as
                                         the three pairwise comparisons it implies (item, annotator, left, right,
                                         outcome; left/right in alphabetical order, not an on-screen side)
  examples/analyze/squality/published_means.csv   the release's own per-response aggregates (`overall`: the mean of the
                                         reviewers' ratings, and the overall ranking), for the check in tests/test_squality.py
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from itertools import combinations
from pathlib import Path

COMMIT = "dc08d4f574639d773bc64ef3ab3527043108fb4e"
HERE = Path(__file__).resolve().parent
CRITERIA = ("correctness", "selection", "overall")
SAMPLE_STORIES = 2


def show(repo: Path, path: str) -> list[dict]:
    text = subprocess.run(["git", "-C", str(repo), "show", f"{COMMIT}:{path}"], check=True, capture_output=True,
                          text=True).stdout
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def main(repo: Path) -> None:
    evaluation = show(repo, "data/human-eval/all-responses.jsonl")
    stories = {}
    for split in ("train", "dev", "test"):
        for row in show(repo, f"data/v1-3/txt/{split}.jsonl"):
            stories[row["metadata"]["passage_id"]] = row
    records, ratings, comparisons, means = [], [], [], []
    for passage in evaluation:
        story = stories[passage["passage-id"]]
        for key, responses in sorted(passage["questions"].items(), key=lambda kv: int(kv[0])):
            question = story["questions"][int(key)]
            if question["question_number"] != int(key) + 1:
                raise SystemExit(f"{passage['passage-id']}: question {key} is not question number {int(key) + 1}")
            item = f"{passage['passage-id']}-q{int(key) + 1}"
            records.append({"id": item, "story": story["document"].strip(), "question": question["question_text"],
                            "responses": [{"system": system, "text": r["response"].strip()}
                                          for system, r in sorted(responses.items())]})
            ranks: dict[str, dict[str, int]] = {}
            for system, response in sorted(responses.items()):
                for review in response["reviews"]:
                    for criterion in CRITERIA:
                        ratings.append({"item": item, "system": system, "annotator": f"reviewer-{review['worker_id']}",
                                        "criterion": criterion, "value": review[f"{criterion}-rating"]})
                    ranks.setdefault(review["worker_id"], {})[system] = review["overall-rank"]
                means.append({"item": item, "system": system,
                              **{f"{c}_mean": response["overall"][f"{c}-rating"] for c in CRITERIA},
                              "overall_ranking": response["overall"]["overall-ranking"]})
            for worker, ranked in sorted(ranks.items()):
                for left, right in combinations(sorted(ranked), 2):
                    outcome = "left" if ranked[left] < ranked[right] else "right" if ranked[right] < ranked[left] else "tie"
                    comparisons.append({"item": item, "annotator": f"reviewer-{worker}", "left": left, "right": right,
                                        "outcome": outcome})
    sample = sorted({r["id"].split("-")[0] for r in records})[:SAMPLE_STORIES]
    with open(HERE / "squality" / "responses.jsonl", "w", encoding="utf-8") as f:
        for record in records:
            if record["id"].split("-")[0] in sample:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
    for name, rows in (("ratings", ratings), ("rank_comparisons", comparisons), ("published_means", means)):
        with open(HERE / "analyze" / "squality" / f"{name}.csv", "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    print(f"{len(records)} questions ({len(sample)} stories in the sample), {len(ratings)} ratings, "
          f"{len(comparisons)} comparisons")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
