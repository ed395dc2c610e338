"""What each protocol document says the annotator sees, as checklists that the browser tests (tests/test_browser.py
in Label Studio, tests/test_gateway_views.py through the gateway) read against the rendered view."""

from __future__ import annotations

import csv

from .conftest import ROOT

# what each protocol document says the annotator sees --------------------------------------------
# phrases: verbatim text of the document (questions, anchors, definitions, examples, steps) that must be on screen
# once the task's panels are open; shown: task fields a rater reads (model outputs to judge included); hidden: task
# fields that must never be on screen (model ratings, gold labels, which interpretation is which, system names).
CHECKLISTS = {
    "sotopia": {
        "phrases": [
            "Carefully read the given social interaction between two agents, with a US sociocultural perspective in mind.",
            "Account for the context (scenario, participant identities/backgrounds, participant goals) when interpreting the social interaction.",
            "Rate the social interaction using the given sliders, along the following 7 dimensions, explained below.",
            "Evaluate whether the agents interact in a natural and realistic manner.",
            "Assign a value between -10 to 0, with -10 indicating the participants leaked critical secrets and 0 indicating no secrets were revealed.",
            "Liam repeats what Ethan said once. 1 This is a bad annotation example.",
            "Miles bought the BMW at his target price. 1 This is a bad annotation example",
            "Donovan did not hint or reveal his secret about releasing classified government information online. 0",
            "Financial and Material Benefits (-5 to 5)", "Social Rules (-10 to 0)", "Goal (0 to 10)",
            "Dimensions and scales for evaluating social interactions:",
            "[We provide some annotation examples below] Annotator's Rationale Rating Assessment",
        ],
        "once": ["Carefully read the given social interaction between two agents"],
        "gateway_only": ["Your Prolific ID is taken from the link you followed from Prolific"],
        "shown": lambda d: [d["scenario"][:60], d["dialogue"][:60], d["agent1_name"], d["agent2_goal"][:40]],
        "hidden": lambda m: [m["model_reasoning"]["agent1"]["goal"][:50], m["model_reasoning"]["agent2"]["believability"][:50]],
    },
    "cmv_tom": {
        "phrases": [
            "In your view, is the designated “persuasive” comment actually persuasive — i.e., does it provide a clear, substantive reason why the OP might change their view?",
            "We are not asking whether you would be persuaded. We are asking whether this comment, in context, offers a clear reason for the OP's stated change of view.",
            "For the persuasive comment only, we extracted TOM values for six categories.",
            "What to check: Do the perspective-taking values match how the commenter considers other viewpoints?",
            "When in doubt, choose Y if the values are plausible given the text; N if they are clearly off.",
            "You will see 30 samples, each containing:",
            "Consistency: Apply the same criteria across all 30 samples.",
            "No discussion: Annotate independently; don’t coordinate answers with others.",
            "Do the TOM Perspective Taking values make sense given the text?",
            "Answer Q1–Q7 with Yes or No, using the criteria above.",
            "Annotation Instructions", "What You Will Annotate", "The Binary Questions", "Summary of Questions",
            "How Progress and Resuming Work", "Tips",
            "How to Annotate in This Website",
            "Output & Next Steps",
            "We will compute inter-annotator agreement (e.g., majority vote or Cohen's Kappa) and use your labels as ground truth for meta-evaluation against our automated persuasiveness and TOM metrics.",
            "Thank you for your careful annotation.",
        ],
        # steps that exist in one channel only (labeling_configs/cmv_tom.xml, Texts marked channel="...")
        "label_studio_only": ["Sign up or log in using your email and password.",
                              "Go to the Annotate page (Label All Tasks)."],
        "gateway_only": ["Open your personal study link", "Start the annotation from the study overview.",
                         "Save & Previous (“← Previous” at the top)"],
        "shown": lambda d: [d["post"][:50], d["comment"][:50], d["delta_reply"][:40], d["comment_beliefs"][:40],
                            d["post_tom"][:30]],
        "hidden": lambda m: ["tom-extractor", m.get("model_version") or "tom-extractor"],
    },
    "cmv_threads": {
        "phrases": [
            "In your view, is the comment persuasive — i.e., does it provide a clear, substantive reason why the OP might change their view?",
            "We are not asking whether you would be persuaded. We are asking whether this comment, in context, offers a clear reason for the OP to change their view.",
            "For each sample you answer 1 binary (Yes/No) question about persuasiveness",
            "Comment — this is what you judge",
            "How to Annotate in This Website", "Summary of Questions", "Tips", "Output & Next Steps",
            "Thank you for your careful annotation.",
        ],
        "label_studio_only": ["Sign up or log in using your email and password."],
        "gateway_only": ["Start the annotation from the study overview."],
        "shown": lambda d: [d["post"][:50], d["comment"][:50]],
        # delta and non-delta threads look the same: no delta marker, no OP reply (it awards the ∆), no word of a
        # designated persuasive comment; no ToM question is asked about values that do not exist
        "hidden": lambda m: ["Delta reply", "received a delta", "delta", "Delta", "∆", "Δ", "designated",
                             "OP's reply", "did not reply", (m.get("op_reply") or "")[:40], "TOM values", "Q2"],
    },
    "circa_part1": {
        "phrases": [
            "For this task we will ask you to help us interpret the indirect answers given by Y.",
            "Y: Only to a comedy. -> X will think that Y means (2) Yes, subject to some conditions",
            "Y: I have mixed feelings. -> X will think that Y means (4) In the middle, neither yes nor no",
            "X thinks that Y means:",
        ],
        "shown": lambda d: [d["context"], d["question"], d["answer"]],
        # no model output at all: none of the model's explanations (of any item) is on screen
        "hidden": lambda m: [row["explanation"] for row in csv.DictReader(
            open(ROOT / "examples" / "circa" / "model_explanations.csv", encoding="utf-8"))],
    },
    "circa_part2": {
        "phrases": [
            "1 is the worst, which means the explanation either contradicts the answer choice or is meaningless. 5 is the best, which means the explanation explains the answer choice very well with meaningful content.",
            "Contradict the answer choice, or support a different answer choice;",
            "Internally contradictory, e.g., \"choice A is right because choice B is right\".",
            "EXPLANATION: A basement is not above ground.",
            "EXPLANATION: Katie is a friend.",
        ],
        # the project's instructions (projects.yaml), shown above the view by the gateway: the incentive of document
        # 002, its amounts from crowd.bonus
        "instructions": ["To incentivize annotators, we provided Amazon coupons (25, 15, 10 EUR) for those that annotated the most examples."],
        "shown": lambda d: [d["context"], d["question"], d["answer"], d["interpretation"], d["explanation"][:50]],
        "hidden": lambda m: ["gold", "prediction", "model's", "Model's"],
    },
    "dialogue": {
        "phrases": [
            "The prompt consists of two people (A and B) talking to each other. The response is the next utterance after the final utterance in the prompt.",
            "“this had nothing to do with the conversation whatsoever”",
            "“That helped the conversation” — This adds new and relevant information to the conversation.",
            "Hard to infer anything about the conversation. Very generic. — Example: “okay”.",
            "literally me or my circle would legitimately say this “Yeah i get you”",
            "Each criteria is annotated on a 5-point scale where 1 is worst and 5 is best.",
            "NOTE: THERE ARE A MAXIMUM OF 5 HITs YOU CAN COMPLETE. COMPLETING ALL 5 HITs WILL GIVE YOU A BONUS! WE ENCOURAGE YOU TO DO ALL 5 HITs",
            "Specific Definitions",
        ],
        "once": ["The annotation task is to label responses to a given prompt."],
        "shown": lambda d: [d["context"][:50], d["response"][:50]],
        "hidden": lambda m: [m["system"], m.get("model_version", "")],
    },
    "health": {
        "phrases": [
            "1: No explanation provided; purely \"black-box\" response with only final conclusions.",
            "10: Fully personalized, context-aware responses with consistent memory of user information provided before.",
            "5: Basic empathetic expressions (e.g., \"I'm sorry to hear that\"). Feels a bit awkward and fake.",
            "1: I completely NOT believe that the AI can help me on healthcare-related questions",
            "10: I will definitely use the system for most daily healthcare-related tasks.",
            "Scores can be any decimal values from 1 to 10 (e.g., 5.5, 7.8, 10), it is not limited to 1, 5, and 10 only.",
            "Each of the 20 dialogues should have one integrated rating based on the full conversations, for all six aspects, two trusts, and one evaluation of your perceived willingness.",
            "Scoring Rules: 1: No explanation provided;",
        ],
        "shown": lambda d: [d["scenario"][:60], d["dialogue"][:60], d["dialogue"][-50:]],
        "hidden": lambda m: [m["system"], m.get("model_version", "")],
    },
}
