"""Build examples/dialogue/mts_next_response.jsonl from MTS-Dialog (CC BY 4.0).

Run from the repository root with ../shared/data beside it:  python examples/build_dialogue_samples.py
Each item is a real doctor-patient context from the MTS-Dialog validation set with two candidate next doctor
turns: the real one ("human-reference") and the turn a TF-IDF retrieval baseline picks from the other dialogues
("tfidf-retrieval": the doctor turn that followed the most similar patient turn elsewhere).
Each response also carries `model_ratings` from a deliberately simple lexical metric ("lexical-metric-v1"), the
stored model output the ML backend prefills and the report compares with the annotators:
  appropriateness      1 + 8 * TF-IDF cosine(last three context turns, response), rounded, capped at 5
  information_content  1 + number of content words (3+ letters) in the response / 4, capped at 5
  human_likeness       5 if the response ends like a sentence and repeats no word 3 times, else 3
"""

import csv
import json
from pathlib import Path

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics.pairwise import linear_kernel

SOURCE = Path("../shared/data/medical_dialogue/mts_dialog/MTS-Dialog-ValidationSet.csv")
OUT = Path("examples/dialogue/mts_next_response.jsonl")
N_ITEMS = 10


def turns(text):
    out = []
    for line in text.splitlines():
        speaker, sep, said = line.partition(":")
        if sep and said.strip():
            out.append({"speaker": speaker.strip(), "text": said.strip()})
    return out


rows = list(csv.DictReader(SOURCE.open(encoding="utf-8", newline="")))
dialogues = [(r["ID"], turns(r["dialogue"])) for r in rows]
# (dialogue id, patient turn, following doctor turn) pairs for the retrieval baseline
pairs = [(i, d[k - 1]["text"], d[k]["text"]) for i, d in dialogues for k in range(1, len(d))
         if d[k]["speaker"] == "Doctor" and d[k - 1]["speaker"] == "Patient"]
vectorizer = TfidfVectorizer().fit([p[1] for p in pairs])
index = vectorizer.transform([p[1] for p in pairs])

def lexical_metric(context, response):
    recent = " ".join(t["text"] for t in context[-3:])
    cosine = float(linear_kernel(vectorizer.transform([recent]), vectorizer.transform([response]))[0, 0])
    words = [w for w in response.lower().split() if sum(c.isalpha() for c in w) >= 3]
    repeated = any(words.count(w) >= 3 for w in set(words))
    return {
        "appropriateness": int(min(5, round(1 + 8 * cosine))),
        "information_content": int(min(5, 1 + len(words) // 4)),
        "human_likeness": 5 if response.rstrip()[-1:] in ".?!" and not repeated else 3,
    }


items = []
for dialogue_id, d in dialogues:
    # context ends with a patient turn; the reference is the doctor turn after it
    cut = max((k for k in range(3, len(d)) if d[k]["speaker"] == "Doctor" and d[k - 1]["speaker"] == "Patient"), default=None)
    if cut is None:
        continue
    context, reference = d[:cut], d[cut]["text"]
    scores = linear_kernel(vectorizer.transform([context[-1]["text"]]), index).ravel()
    best = next(j for j in scores.argsort()[::-1] if pairs[j][0] != dialogue_id)
    items.append({"id": f"mts-val-{dialogue_id}", "context": context, "model_version": "lexical-metric-v1", "responses": [
        {"system": system, "text": text, "model_ratings": lexical_metric(context, text)}
        for system, text in (("human-reference", reference), ("tfidf-retrieval", pairs[best][2]))
    ]})
    if len(items) == N_ITEMS:
        break

OUT.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8")
print(f"wrote {len(items)} items to {OUT}")
