"""Which answers came from a prediction: a result region matched with the predicted region it may have started as.

A region of a prefilled answer (model-assisted labelling, `prefill` in projects.yaml) is the prediction's when it
is the predicted region of the same key with the same value. A whole-task answer's key is its control; a span's
(and its per-region answers') is its control and the region id Label Studio's editor keeps from the prediction, so
a span the annotator kept, changed (its extent or label), removed or added is told apart (ESA-AI's post-edits).
A span's value is compared on its offsets and labels, not on the text as the editor wrote it."""

from __future__ import annotations



def region_key(region: dict) -> tuple:
    """The key a region is matched on: (control,) or, for a span or per-region answer, (control, region id)."""
    value = region.get("value") if isinstance(region.get("value"), dict) else {}
    ident = region.get("id")
    if isinstance(ident, str) and ("start" in value or region.get("type") == "labels"):
        return (region.get("from_name"), ident)
    return (region.get("from_name"),)


def same_value(predicted, given) -> bool:
    """The answer is the predicted one: equal values, a span's and a per-region answer's compared without its text
    (the editor may write line breaks and spaces otherwise than the prediction did)."""
    if isinstance(predicted, dict) and isinstance(given, dict) and "start" in given:
        return ({k: v for k, v in predicted.items() if k != "text"} == {k: v for k, v in given.items() if k != "text"})
    return predicted == given


def shown_prediction(result, prefill) -> list:
    """What of a prediction an annotator starts from: all of it with `prefill: true`; with `prefill: judge:NAME` the
    judge's spans and their per-region answers only (ESA-AI pre-marks errors: the score stays the annotator's, never
    anchored on the judge's)."""
    regions = [r for r in result or [] if isinstance(r, dict)]
    if prefill is True:
        return regions
    return [r for r in regions if len(region_key(r)) == 2]


def prefill_predictions(predictions, prefill) -> list[dict]:
    """The predictions a prefill draws on: every one with `prefill: true`, the judge's (its model_version) only with
    `prefill: judge:NAME`."""
    return [p for p in predictions or [] if isinstance(p, dict)
            and (prefill is True or p.get("model_version") == prefill)]
