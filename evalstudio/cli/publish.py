"""`evalstudio publish` and `evalstudio reproduce`: a finished study as a publication package, and the package set
up again on another Label Studio."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Optional

import typer

from evalstudio.base.errors import BadInput, EvalstudioError

from .base import ProjectsOption, app, chosen_spec, console, err, fail_with

DEFAULT_KEY = Path(".evalstudio/publish.key")


@app.command()
def publish(
    protocol: Annotated[Optional[str], typer.Argument(
        help="Protocol name, e.g. circa (the study run on Label Studio); with --ratings, its criteria read the "
             "file.")] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="A new folder for the package.")] = Path("publication"),
    participants: Annotated[Optional[Path], typer.Option(
        "--participants", help="The study's participants folder (default: .evalstudio/participants): its ledger "
                               "gives the order each participant was served, their lists and whether each answer "
                               "was shown the prediction (from_prediction).")] = None,
    key_file: Annotated[Path, typer.Option(
        "--key-file", help="The key of the annotators' pseudonyms, made on first use (owner-only); keep it, and "
                           "keep it out of the package: the same key gives the same pseudonyms in a later "
                           "release.")] = DEFAULT_KEY,
    pay: Annotated[Optional[float], typer.Option(
        min=0, help="The base pay per approved participant (the platform's reward), for the effective hourly pay "
                    "in the datasheet; bonuses come from the study's rules.")] = None,
    currency: Annotated[Optional[str], typer.Option(help="The currency of --pay (default: the bonus's).")] = None,
    license_: Annotated[str, typer.Option(
        "--license", help="The data's licence for the dataset card (an SPDX id such as cc-by-4.0); 'unknown' "
                          "until you choose.")] = "unknown",
    bootstrap: Annotated[int, typer.Option(min=0, help="Bootstrap resamples for the agreement intervals.")] = 1000,
    ratings: Annotated[Optional[Path], typer.Option(
        help="Publish a study from its ratings file instead (any file `analyze` reads; an MTurk batch results file "
             "gives recruitment, rejections, time and pay too): the datasheet and the data release, no "
             "instrument.")] = None,
    spec: Annotated[Optional[Path], typer.Option(help="With --ratings: the file's analysis spec.")] = None,
    projects: ProjectsOption = None,
):
    """A finished (or running) study as a publication package.

    Writes into a new folder: datasheet.md and datasheet.json (the Human Evaluation Datasheet, Shimorina & Belz
    2022, every question answered from the study or listed as open, and the ACL Responsible NLP checklist's section
    D); data_release/ (the counted ratings as Parquet and CSV, annotators as keyed pseudonyms, a Hugging Face
    dataset card and Croissant metadata); review_free_text.csv (every free-text answer, to read before release);
    instrument/ and MANIFEST.json (the labeling configs, projects.yaml entries, instructions, tasks as shown, the
    order and lists, with the SHA-256 of every file and of every text annotators saw).

    No platform id, e-mail address, sign-in code, password or session id is written anywhere in the folder. With
    --ratings (a study run elsewhere), the datasheet answers what the file holds and the data release is written;
    the interface's questions stay open."""
    from evalstudio.base.files import staged_folder

    from evalstudio.operations.publishing import publish_ratings, publish_study

    try:
        if output.exists() and (not output.is_dir() or any(output.iterdir())):
            raise BadInput(f"-o {output}: exists and is not an empty folder; give a new folder for the package")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.+-]{0,63}", license_):
            raise BadInput(f"--license: {license_!r} is not a licence id; give an SPDX id such as cc-by-4.0 (or unknown)")
        if currency is not None and not re.fullmatch(r"[A-Za-z]{3}", currency):
            raise BadInput(f"--currency: {currency!r} is not a currency code; give three letters such as EUR")
        if ratings is None and protocol is None:
            raise BadInput("name the PROTOCOL of a study run on Label Studio, or give --ratings FILE")
        if ratings is None and spec is not None:
            raise BadInput("--spec reads a --ratings file; a study on Label Studio is read with its projects.yaml")
        with console.status("reading the study and computing agreement..."), staged_folder(output) as stage:
            if ratings is not None:
                summary = publish_ratings(ratings, chosen_spec(spec, protocol, projects), stage, key_file, output,
                                          pay, currency, license_, bootstrap)
            else:
                summary = publish_study(protocol, projects, participants, stage, key_file, output, pay, currency,
                                        license_, bootstrap)
    except EvalstudioError as e:
        raise fail_with(e)
    console.print(f"{summary['ratings']} ratings by {summary['annotators']} annotators written to "
                  f"{output / 'data_release'}; the datasheet has {summary['open']} open question(s) for you "
                  f"({output / 'datasheet.md'}).", highlight=False)
    for warning in summary.get("warnings", []):
        err.print(f"warning: {warning}", highlight=False, soft_wrap=True)
    if summary["free_text"]:
        console.print(f"Read the {summary['free_text']} free-text answer(s) in {output / 'review_free_text.csv'} "
                      "before you release the data.", highlight=False)
    console.print(f"The pseudonym key stays in {key_file}: keep it out of the package.", highlight=False)


@app.command()
def reproduce(
    package: Annotated[Path, typer.Argument(help="A folder `evalstudio publish` wrote.")],
):
    """Set a published study up again on this Label Studio, from its package alone.

    Checks every file of instrument/ against MANIFEST.json first and refuses, naming the file, when one differs (a
    changed instruction is another instrument). Then creates the projects from the package's projects.yaml and
    labeling configs, imports the tasks in the published order, and compares what Label Studio holds with the
    manifest: each config, each task's shown fields and the order, by SHA-256. The order seed is drawn anew (the
    package does not hold the original's); the gateway's settings are the package's projects.yaml."""
    from evalstudio.labelstudio.client import Client
    from evalstudio.labelstudio.connection import settings_from_env

    from evalstudio.operations.publishing import reproduce_package

    try:
        lines = reproduce_package(package, Client(settings_from_env()))
    except EvalstudioError as e:
        raise fail_with(e)
    for line in lines:
        console.print(line, highlight=False)
