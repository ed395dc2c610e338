"""`evalstudio judge`: LLM judges with the annotators' own instrument (the run: evalstudio.operations.judging)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from evalstudio.base.errors import EvalstudioError
from evalstudio.operations.judging import DEFAULT_CACHE, run_judges

from .base import ProjectsOption, fail_with, app, console, err


@app.command()
def judge(
    protocol: Annotated[str, typer.Argument(help="The protocol (or study: circa judges both parts) to judge.")],
    files: Annotated[Optional[list[Path]], typer.Argument(
        help="Input files, as `import` reads them: judged without Label Studio. Without them, every task of the "
             "protocol's Label Studio projects.")] = None,
    model: Annotated[Optional[list[str]], typer.Option(
        help="The model as the endpoint names it (repeat for several judges). Without it: the `judges:` list of "
             "projects.yaml.")] = None,
    base_url: Annotated[Optional[list[str]], typer.Option(
        help="The endpoint's OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1 (vLLM, SGLang, llama.cpp, "
             "Ollama) or a hosted API: one for every --model, or one per --model in the same order.")] = None,
    name: Annotated[Optional[list[str]], typer.Option(
        help="What reports call each judge (default: the model's name); one per --model.")] = None,
    key_env: Annotated[str, typer.Option(
        help="The environment variable holding the endpoint's API key (never give a key on the command line).")]
    = "OPENAI_API_KEY",
    samples: Annotated[int, typer.Option(min=1, max=50, help="Answers per task (and order): their spread is the "
                                                             "judge's confidence per task; more than 1 needs "
                                                             "--temperature above 0.")] = 1,
    temperature: Annotated[float, typer.Option(min=0.0, max=2.0)] = 0.0,
    max_tokens: Annotated[int, typer.Option(min=16, help="The longest answer asked for.")] = 1024,
    one_order: Annotated[bool, typer.Option(
        "--one-order", help="Pairwise and best-worst: ask only in the stored order (by default also reversed, to "
                            "measure and cancel position bias).")] = False,
    concurrency: Annotated[int, typer.Option(min=1, max=512, help="Requests in flight at once.")] = 8,
    per_minute: Annotated[Optional[int], typer.Option(min=1, help="At most this many requests started a "
                                                                  "minute (the endpoint's rate limit).")] = None,
    retries: Annotated[int, typer.Option(min=0, max=20, help="Attempts after the first on 429, 5xx and "
                                                             "timeouts.")] = 6,
    timeout: Annotated[float, typer.Option(min=1.0, help="Seconds to wait for one answer (and for the endpoint's "
                                                         "first answer, checked before judging).")] = 120.0,
    price_in: Annotated[Optional[float], typer.Option(help="Price per million prompt tokens, for the cost.")] = None,
    price_out: Annotated[Optional[float], typer.Option(help="Price per million answer tokens.")] = None,
    limit: Annotated[Optional[int], typer.Option(min=1, help="Judge only the first N tasks of each part "
                                                             "(to try a judge first).")] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder for metrics.csv, answers.jsonl, "
                                                                "prompts.jsonl and summary.csv.")] = Path("judge"),
    cache: Annotated[Path, typer.Option(help="The answer cache (a re-run asks nothing again).")] = DEFAULT_CACHE,
    to_label_studio: Annotated[bool, typer.Option(
        "--to-label-studio", help="Also store each judge's combined answer as a Label Studio prediction of the task, "
                                  "model version judge:NAME (again: replaced, never doubled), which `analyze "
                                  "--protocol` then reads as the metric 'prediction judge:NAME'. Participants of "
                                  "the gateway never get predictions; people who sign in to Label Studio itself "
                                  "can read them through its API: store them after such a study.")] = False,
    projects: ProjectsOption = None,
):
    """Run LLM judges over a protocol's tasks with the annotators' own instrument.

    Each prompt is what a participant of the gateway sees, and nothing else: the protocol's instructions, then the
    task's page (the labeling config's headings, definitions, anchors and examples, the task's displayed fields in
    place, the questions), then the answer form as a JSON schema of the controls. No system name, gold answer,
    model rating or hidden field reaches a prompt. Answers are checked as a participant's are (every required
    question, values on the scale); a malformed answer is asked again twice, then recorded as missing with its
    reason. Pairwise and best-worst tasks are asked in both orders.

    Writes metrics.csv (item, system, metric, criterion, value, confidence: `analyze --metrics` reads it),
    answers.jsonl (every answer with the digest of the prompt it answered), prompts.jsonl and summary.csv (per
    judge: answers, missing and why, cache, tokens, cost, order consistency, position bias). Answers are cached
    (--cache): Ctrl-C keeps what was answered, and the same command again asks only the rest."""
    try:
        done, total, stopped = run_judges(protocol, files, model, base_url, name, key_env, samples, temperature,
                                          max_tokens, one_order, concurrency, per_minute, retries, timeout, price_in,
                                          price_out, limit, output, cache, to_label_studio, projects)
    except (EvalstudioError, ValueError) as e:
        raise fail_with(e)
    if stopped:
        err.print(f"stopped: {done} of {total} task judgements done and written to {output}; every answer so far "
                  "is cached: the same command again asks only the rest", highlight=False, soft_wrap=True)
        raise typer.Exit(130)
    spans = (output / "spans.csv").exists()  # (a span protocol's judges' spans)
    console.print(f"{done} task judgement(s) in {output}/ (metrics.csv: `evalstudio analyze --protocol {protocol} "
                  f"--metrics {output}/metrics.csv`" + ("; spans.csv: the judges' spans; with --to-label-studio, "
                                                        "`evalstudio report` compares them with the annotators'; "
                                                        "annotations.csv: every answer (`active draw "
                                                        "--criterion has_error`)"
                                                        if spans else "") + ")", highlight=False, markup=False,
                  soft_wrap=True)  # (the command whole on its line, to be copied)
