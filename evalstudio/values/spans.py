"""Error spans: the text a `<Labels>` region marks, and which controls evalstudio can put in a table.

What Label Studio stores for a span of a Text (its editor, 1.23, tried in a real browser by
tests/test_spans_browser.py on German, Chinese, emoji with a skin tone and a flag, combining accents, CRLF line
breaks, tabs and runs of spaces): `start` and `end` count code points, as Python indexes a string (an emoji of one
code point counts 1, a flag of two regional indicators 2, a combining accent 1, CRLF 2), so `shown[start:end]` is
the span. Its `text` is not always that slice: it is what the browser's selection reads, with every line break
written as the two characters backslash and n, and a run of spaces or a tab as one space. evalstudio keeps that as
`ls_text` and gives the slice as `text`, after checking that the two say the same apart from white space.
"""

from __future__ import annotations

# controls whose answers evalstudio tabulates: segment answers (the tidy frame's `value` or a metadata column) and
# spans of a Text (a spans table); a config with any other control is refused, so no answer is ever left out
SEGMENT_TAGS = ("Choices", "Number", "Rating", "TextArea")
SPAN_TAGS = ("Labels",)
TABULATED = SEGMENT_TAGS + SPAN_TAGS
PER_REGION_TAGS = ("Choices", "Number", "Rating", "TextArea")  # perRegion="true": one answer per span


def is_per_region(control) -> bool:
    """The control is answered once per span (perRegion="true"), not once per task."""
    return str(control.attr.get("perRegion", "false")).lower() == "true"


def span_object_field(li, control) -> str | None:
    """The task data field holding the text a Labels control marks (its Text object's `$field`); None when the
    object is not a Text showing one field."""
    names = control.to_name or []
    if len(names) != 1:
        return None
    try:
        shown = li.get_object(names[0])
    except Exception:
        return None
    value = str(getattr(shown, "value", "") or "")
    if shown.tag != "Text" or not value.startswith("$") or str(shown.attr.get("valueType", "text")) != "text":
        return None
    return value[1:]


def loose(text: str) -> str:
    """A span's text as Label Studio's editor may store it, compared apart from white space: its line breaks are
    the two characters backslash and n, its runs of spaces one space."""
    return " ".join(text.replace("\\n", " ").split())


MAX_SPAN = 1_000_000  # characters in one shown text a span may mark
MAX_SPANS = 100  # spans in one answer (MQM allows five errors per segment; a long document a few dozen)



def span_problem(shown: str, start, end, claimed) -> str | None:
    """What is wrong with a span as Label Studio stores it (code-point offsets into the shown text and the text
    they cover, as its editor writes it); None when it marks a piece of the shown text and says which."""
    for name, offset in (("start", start), ("end", end)):
        if isinstance(offset, bool) or not isinstance(offset, int):
            return f"its {name} is not a whole number"
        if not 0 <= offset <= len(shown):
            return f"its {name} {offset} is outside the text (0..{len(shown)})"
    if end <= start:
        return f"the span {start}..{end} is empty or reversed"
    if not isinstance(claimed, str) or loose(claimed) != loose(shown[start:end]):
        return f"the span {start}..{end} covers other text than it says"
    return None


def limited_controls(key: str) -> tuple[str, ...]:
    """The span controls a `max_spans` key caps together: one name, or several joined by '+' (MQM: the errors marked
    in the translation and in the source are one segment's five)."""
    return tuple(name.strip() for name in str(key).split("+"))


def over_limits(counts: dict[str, int], max_spans: dict[str, int]) -> dict[str, tuple[int, int]]:
    """Each `max_spans` key whose controls' spans together exceed its cap: key -> (marked, cap); `counts`: spans by
    control."""
    out = {}
    for key, cap in max_spans.items():
        marked = sum(counts.get(name, 0) for name in limited_controls(key))
        if marked > cap:
            out[key] = (marked, cap)
    return out


def span_controls(li) -> tuple[list[str], list[str]]:
    """(the span controls, the per-region controls) of a labeling config, each in the config's order."""
    spans = [c.name for c in li.controls if c.tag in SPAN_TAGS]
    per_region = [c.name for c in li.controls if c.tag not in SPAN_TAGS and is_per_region(c)]
    return spans, per_region
