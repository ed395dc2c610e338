"""Build examples/dialogue/mts_next_response.jsonl from MTS-Dialog (CC BY 4.0).

Run from the repository root with ../shared/data beside it:  python examples/build_dialogue_samples.py
Each item is a real doctor-patient context from the MTS-Dialog validation set with two candidate next doctor
turns: the real one ("human-reference") and the turn a TF-IDF retrieval baseline picks from the other dialogues
("tfidf-retrieval": the doctor turn that followed the most similar patient turn elsewhere).
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

items = []
for dialogue_id, d in dialogues:
    # context ends with a patient turn; the reference is the doctor turn after it
    cut = max((k for k in range(3, len(d)) if d[k]["speaker"] == "Doctor" and d[k - 1]["speaker"] == "Patient"), default=None)
    if cut is None:
        continue
    context, reference = d[:cut], d[cut]["text"]
    scores = linear_kernel(vectorizer.transform([context[-1]["text"]]), index).ravel()
    best = next(j for j in scores.argsort()[::-1] if pairs[j][0] != dialogue_id)
    items.append({"id": f"mts-val-{dialogue_id}", "context": context, "responses": [
        {"system": "human-reference", "text": reference},
        {"system": "tfidf-retrieval", "text": pairs[best][2]},
    ]})
    if len(items) == N_ITEMS:
        break

OUT.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8")
print(f"wrote {len(items)} items to {OUT}")
