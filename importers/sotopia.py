"""Sotopia EpisodeLog JSONL dumps (one episode per line, as in the published Sotopia dataset).

Keeps the evaluator's per-agent ratings (`rewards`) and reasoning in the task, for prefill and comparison.
"""

from __future__ import annotations

import re

from evalstudio.values.sources import FieldError, collect, control_value, no_context, read_jsonl, require, turns_text

NAME = "sotopia"
# The record fields this importer reads; any other field is kept with the task as metadata (and reported once).
FIELDS = frozenset({"episode_id", "scenario", "agents_background", "social_goals", "raw_messages", "rewards", "reasoning",
                    "experiment_tag", "codename", "experiment_model_name_pairs"})
AGENTS = ("agent1", "agent2")
prepare = no_context
read = read_jsonl

_SAID = re.compile(r'^said:\s*"(.*)"\s*$', re.S)
_AGENT_HEADER = re.compile(r"^Agent (\d) comments:\s*$")


def convert(record: dict, project, context) -> list[dict]:
    """One Sotopia episode (two agents, their backgrounds and goals, the dialogue) as its task."""
    episode_id = require(record, "episode_id")
    backgrounds = require(record, "agents_background", dict)
    goals = require(record, "social_goals", dict)
    names = list(backgrounds)
    if len(names) != 2:
        raise FieldError("agents_background", f"expected 2 agents, found {len(names)}")
    for name in names:
        if name not in goals:
            raise FieldError(f"social_goals.{name}", "missing (every agent in agents_background needs a goal)")
    data = {
        "evalstudio_id": f"sotopia:{episode_id}",
        "item_id": episode_id,
        "system": _text_field(record, "experiment_tag") or "unknown",
        "scenario": _plain(require(record, "scenario")),
        "codename": _text_field(record, "codename"),
        "dialogue": turns_text(_dialogue(require(record, "raw_messages", list))),
    }
    models = record.get("experiment_model_name_pairs") or []
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise FieldError("experiment_model_name_pairs", "expected a list of model names")
    for agent, name in zip(AGENTS, names):
        data[f"{agent}_name"] = name
        data[f"{agent}_background"] = _plain(require(backgrounds, name))
        data[f"{agent}_goal"] = _plain(require(goals, name))
    if len(models) == 3:
        data["model_version"] = models[0]
        data["agent_models"] = dict(zip(AGENTS, models[1:]))
    reasoning = record.get("reasoning") or ""
    if not isinstance(reasoning, str):
        raise FieldError("reasoning", f"expected the evaluator's text, got {type(reasoning).__name__}")
    if "rewards" in record:
        data["model_ratings"] = _ratings(record["rewards"], project)
        data["model_reasoning"] = _reasoning(reasoning, project)
    return [data]


def _text_field(record: dict, name: str) -> str:
    """An optional text field ("" when absent); FieldError for any other type (e.g. an object)."""
    value = record.get(name)
    if value is None:
        return ""
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise FieldError(name, f"expected text, got {type(value).__name__}")
    return str(value)


def _dialogue(raw_messages: list) -> list[dict]:
    """Agent actions (sender -> Environment) as {speaker, text} turns; 'did nothing' is dropped."""
    turns = []
    for t, turn in enumerate(raw_messages):
        if not isinstance(turn, list):
            raise FieldError(f"raw_messages[{t}]", "expected a list of [sender, receiver, text]")
        for m, message in enumerate(turn):
            if not (isinstance(message, list) and len(message) == 3 and all(isinstance(x, str) for x in message)):
                raise FieldError(f"raw_messages[{t}][{m}]", "expected [sender, receiver, text]")
            sender, receiver, text = message
            if receiver != "Environment" or sender == "Environment" or text.strip() == "did nothing":
                continue
            said = _SAID.match(text.strip())
            turns.append({"speaker": sender, "text": said.group(1) if said else f"[{text.strip()}]"})
    if not turns:
        raise FieldError("raw_messages", "the episode has no agent utterances")
    return turns


_MARKUP = re.compile(r"</?(?:p|extra_info|strategy_hint|clarification_hint)\b[^>]*>")


def _plain(text: str) -> str:
    """Drop Sotopia's viewer/hint markup (<p viewer="environment">, <extra_info>, <strategy_hint>); the text inside
    already says what it is."""
    return re.sub(r"\s+", " ", _MARKUP.sub(" ", text)).replace("( ", "(").replace(" )", ")").strip()


def _ratings(rewards, project) -> dict:
    """Both agents' evaluator scores, each checked against the criterion's range."""
    if not isinstance(rewards, list) or len(rewards) != 2:
        raise FieldError("rewards", "expected a list with one entry per agent")
    ratings, checks = {}, []
    for i, (agent, entry) in enumerate(zip(AGENTS, rewards)):
        if isinstance(entry, list) and len(entry) == 2:  # raw EpisodeLog form: [overall, {dimension: score}]
            entry = entry[1]
        if not isinstance(entry, dict):
            raise FieldError(f"rewards[{i}]", "expected {dimension: score}")
        ratings[agent] = {}
        for dim, spec in project.criteria.items():
            control = (spec.control or dim).format(agent=agent)
            checks.append(_rating_check(ratings[agent], entry, f"rewards[{i}].{dim}", dim, project, control))
    collect(*checks)
    return ratings


def _rating_check(out: dict, entry: dict, field: str, dim: str, project, control: str):
    def check():
        if dim not in entry:
            raise FieldError(field, "missing")
        out[dim] = control_value(field, entry[dim], project, control)  # range, step and type of the slider

    return check


def _reasoning(text: str, project) -> dict:
    """'Agent 1 comments:\\nbelievability: ...' blocks -> {agent: {dimension: text}}."""
    out: dict[str, dict[str, str]] = {agent: {} for agent in AGENTS}
    agent, dim = None, None
    for line in text.splitlines():
        header = _AGENT_HEADER.match(line.strip())
        if header:
            index = int(header.group(1)) - 1
            agent = AGENTS[index] if index < len(AGENTS) else None
            dim = None
            continue
        key, sep, rest = line.partition(":")
        if agent and sep and key.strip() in project.criteria:
            dim = key.strip()
            out[agent][dim] = rest.strip()
        elif agent and dim and line.strip():
            out[agent][dim] += "\n" + line.strip()
    return out
