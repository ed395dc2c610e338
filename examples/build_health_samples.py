"""Build examples/health/assistant_versions.jsonl: one health scenario, four assistant versions, 8 exchanges each.

No public dialogues rated on these criteria exist (see examples/SOURCES.md), so this sample was written for
evalstudio. It follows the usual 2x2 design of such studies: the assistant's advice is the same in every version;
versions add explanations (why), control (the user chooses), both, or both plus emotional acknowledgement.
Each dialogue carries `model_ratings` from a simple lexicon metric ("lexicon-metric-v1"): the share of assistant
turns with explanation cues (because, so, means...), choice offers (would you, which, you decide...) and empathy
cues (understand, normal, proud...), mapped to 1-10, for the ML backend to prefill and the report to compare.
Run from the repository root:  python examples/build_health_samples.py
"""

import json
from pathlib import Path

OUT = Path("examples/health/assistant_versions.jsonl")
SCENARIO = ("You were recently told your blood sugar after meals is too high (early type 2 diabetes). "
            "You ask your health assistant for help over one week.")
# (user turn, advice, explanation, control offer, emotional acknowledgement)
EXCHANGES = [
    ("My doctor says my sugar spikes after dinner. What should I do?",
     "Take a 15-minute walk after dinner.",
     "Working muscles take up glucose from the blood, which flattens the spike after a meal.",
     "Would a walk suit you, or would you prefer something you can do indoors?",
     "A new diagnosis can be unsettling; you are doing the right thing by acting early."),
    ("I can't walk outside, it's dark after dinner.",
     "Then do 10 minutes of stair climbing or marching in place.",
     "Any moderate movement right after eating has a similar effect to walking.",
     "You decide the activity; I will only remind you at the time you pick.",
     "That is a very common obstacle, and it is good that you told me."),
    ("OK. What about breakfast? I usually have cereal and juice.",
     "Swap the juice for whole fruit and the cereal for oats with nuts or yoghurt.",
     "Juice and refined cereal are digested fast; fibre, fat and protein slow the rise in sugar.",
     "Which of these swaps would you like to try first?",
     "Changing breakfast habits is hard; small steps are fine."),
    ("I measured 9.8 two hours after lunch today.",
     "That is above the usual target of under 8.5; note what you ate and we will compare tomorrow.",
     "Comparing meals shows which foods raise your sugar most, so changes can be targeted.",
     "Do you want me to log the meals for you, or would you rather keep your own notes?",
     "I understand a high number can be worrying; one reading does not define your progress."),
    ("Lunch was white rice and chicken curry.",
     "Next time try half the rice with extra vegetables, or brown rice.",
     "White rice has a high glycaemic index; less of it and more fibre lowers the peak.",
     "You know what you enjoy: pick the option you can keep up.",
     "You don't need to give up the food you like."),
    ("I did half rice today and got 7.9!",
     "Well done, that is within the target. Keep the same portion this week.",
     "The lower reading suggests the smaller rice portion made the difference.",
     "Shall we keep this plan, or adjust something else next?",
     "That is great progress, you should be proud of it."),
    ("I'm tired of measuring every day though.",
     "Measure after two meals a week instead of every day.",
     "Occasional checks are enough to confirm a trend once the plan is stable.",
     "Which days suit you best for checking?",
     "Feeling worn out by it is completely normal."),
    ("Thanks. Anything else for next week?",
     "Keep the walks or stairs, the breakfast swap and the half rice; we will review in a week.",
     "Sticking with changes that already work matters more than adding new ones.",
     "If you'd like to add one new goal, tell me which.",
     "You have made a strong start; I'm glad to keep supporting you."),
]
VERSIONS = {
    "v1-baseline": (False, False, False),
    "v2-explains": (True, False, False),
    "v3-user-control": (False, True, False),
    "v4-explains-control-empathy": (True, True, True),
}

CUES = {
    "explainability": ("because", "which ", "so ", "means", "suggests", "effect", "shows"),
    "controllability": ("would you", "which of", "you decide", "do you want", "shall we", "pick", "tell me which", "if you'd like"),
    "emotional_interaction": ("understand", "normal", "proud", "unsettling", "worrying", "glad", "hard", "common obstacle"),
}


def lexicon_metric(exchanges):
    replies = [e["assistant"].lower() for e in exchanges]
    share = {k: sum(any(c in r for c in cues) for r in replies) / len(replies) for k, cues in CUES.items()}
    return {k: round(1 + 9 * v, 1) for k, v in share.items()}


lines = []
for version, (explain, control, empathy) in VERSIONS.items():
    exchanges = []
    for user, advice, why, choice, feeling in EXCHANGES:
        parts = ([feeling] if empathy else []) + [advice] + ([why] if explain else []) + ([choice] if control else [])
        exchanges.append({"user": user, "assistant": " ".join(parts)})
    lines.append({"scenario_id": "post-meal-glucose", "scenario": SCENARIO, "system": version, "exchanges": exchanges,
                  "model_ratings": lexicon_metric(exchanges), "model_version": "lexicon-metric-v1"})
OUT.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
print(f"wrote {len(lines)} dialogues to {OUT}")
