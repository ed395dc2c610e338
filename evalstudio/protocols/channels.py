"""Instructions that fit the channel a participant uses. Annotators meet a study either in Label Studio itself or
through the participant gateway, and some steps exist in only one of them ("Go to the Annotate page (Label All
Tasks)", "sign up with your Prolific e-mail address" are Label Studio's; the gateway signs participants in from their
study link). In a project's instructions an element marked `data-channel="label-studio"` or `data-channel="gateway"`
is shown in that channel only (the element with all it holds); everything else is shown in both.

The instructions are the researcher's HTML from projects.yaml; they are re-emitted as written, token by token
(html.parser), minus the elements of the other channel, minus comments (the researcher's notes) and minus the
`data-channel` marks themselves (Label Studio drops data attributes from the instructions it stores)."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

CHANNELS = ("label-studio", "gateway")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Filter(HTMLParser):
    def __init__(self, channel: str):
        super().__init__(convert_charrefs=False)
        self.channel = channel
        self.out: list[str] = []
        self.skipping: list[str] = []  # open elements inside an element of the other channel (its tag first)

    def _emit(self, text: str) -> None:
        if not self.skipping:
            self.out.append(text)

    def handle_starttag(self, tag, attrs):
        wanted = dict(attrs).get("data-channel")
        if self.skipping:
            if tag not in VOID:
                self.skipping.append(tag)
            return
        if wanted is not None and wanted != self.channel:
            if tag not in VOID:
                self.skipping.append(tag)
            return
        self.out.append(self._tag(tag, attrs, wanted))

    def handle_startendtag(self, tag, attrs):
        wanted = dict(attrs).get("data-channel")
        if not self.skipping and wanted in (None, self.channel):
            self.out.append(self._tag(tag, attrs, wanted, "/"))

    def _tag(self, tag, attrs, wanted, end="") -> str:
        """The start tag as written, or without its data-channel mark (Label Studio drops data attributes from the
        instructions it stores: what it stores is then what is sent)."""
        if wanted is None:
            return self.get_starttag_text()
        kept = "".join(f' {k}' if v is None else f' {k}="{html.escape(v, quote=True)}"'
                       for k, v in attrs if k != "data-channel")
        return f"<{tag}{kept}{end}>"

    def handle_endtag(self, tag):
        if self.skipping:
            if tag in self.skipping:  # (tolerant of an unclosed element inside)
                while self.skipping and self.skipping.pop() != tag:
                    pass
            return
        self.out.append(f"</{tag}>")

    def handle_data(self, data):
        self._emit(data)

    def handle_entityref(self, name):
        self._emit(f"&{name};")

    def handle_charref(self, name):
        self._emit(f"&#{name};")

    def handle_comment(self, data):
        pass  # the researcher's notes: never shown to annotators (nor in their page's source)

    def handle_decl(self, decl):
        self._emit(f"<!{decl}>")


def for_channel(html: str, channel: str) -> str:
    """`html` as annotators of `channel` ("label-studio" or "gateway") read it (see the module)."""
    if channel not in CHANNELS:
        raise ValueError(f"unknown channel {channel!r}; valid: {', '.join(CHANNELS)}")
    if "data-channel" not in html and "<!--" not in html:
        return html
    parser = _Filter(channel)
    parser.feed(html)
    parser.close()
    return "".join(parser.out)


def channel_problems(html: str) -> list[str]:
    """What is wrong with the instructions' channel marks (for the registry's checks)."""
    import re

    return [f"data-channel={value!r} is not a channel; use one of: {', '.join(CHANNELS)}"
            for value in re.findall(r"""data-channel\s*=\s*["']?([^"'\s>]*)""", html) if value not in CHANNELS]


# In a labeling config, a self-closing element (a Text or Header of the instructions) may carry channel="..." in the
# same sense; Label Studio gets the config without the gateway's elements, the gateway without Label Studio's, and
# neither sees the attribute. (Only self-closing elements: what a channel changes is a line of text, never a control.)
_MARKED = re.compile(r'[ \t]*<(\w+)\b([^<>]*?)\s+channel="([^"]*)"([^<>]*?)(/?)>(?:[ \t]*\n)?')


# Label Studio writes each choice's keyboard shortcut after it ("0[1]", "Yes[1]"), which reads like part of a digit
# answer; the shortcuts still work, the hints are not shown (in every config with choices, whether or not it says so)
HINTS_HIDDEN = ".lsf-choice .lsf-hint { display: none; }"


def config_for(xml: str, channel: str) -> str:
    """A labeling config as `channel` ("label-studio" or "gateway") gets it (see above), with the choices'
    shortcut hints hidden."""
    if channel not in CHANNELS:
        raise ValueError(f"unknown channel {channel!r}; valid: {', '.join(CHANNELS)}")
    if "<Choices" in xml and HINTS_HIDDEN not in xml:
        root = re.search(r"<View\b[^>]*>", xml)
        if root and not root.group(0).endswith("/>"):
            xml = f"{xml[:root.end()]}<Style>{HINTS_HIDDEN}</Style>{xml[root.end():]}"
    if ' channel="' not in xml:
        return xml

    def keep(match: re.Match) -> str:
        tag, before, wanted, after, closed = match.groups()
        if wanted != channel:
            return ""
        indent = match.group(0)[:len(match.group(0)) - len(match.group(0).lstrip(" \t"))]
        tail = "\n" if match.group(0).endswith("\n") else ""
        return f"{indent}<{tag}{before}{after}{closed}>{tail}"
    return _MARKED.sub(keep, xml)


def config_channel_problems(xml: str) -> list[str]:
    """What is wrong with a labeling config's channel="..." marks (elements shown on one channel only)."""
    out = []
    xml = re.sub(r"<!--.*?-->", "", xml, flags=re.S)  # (a comment may speak of channel="...")
    if len(re.findall(r'\schannel="', xml)) != len(_MARKED.findall(xml)):
        out.append('an element marked channel="..." has a ">" or "<" in an attribute before its end: write them as '
                   "&gt; and &lt; there")
    for match in _MARKED.finditer(xml):
        tag, _, wanted, _, closed = match.groups()
        if wanted not in CHANNELS:
            out.append(f'<{tag} channel="{wanted}">: not a channel; use one of: {", ".join(CHANNELS)}')
        elif not closed:
            out.append(f'<{tag} channel="{wanted}">: only a self-closing element (a Text or Header) can be marked '
                       "for one channel")
    return out
