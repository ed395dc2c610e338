"""The operator's two consoles (stdout and stderr) that the commands and the operations below them print to: rich
consoles with markup off and every control character written out. Uses rich and evalstudio.base.errors."""

from __future__ import annotations

from rich.console import Console

from evalstudio.base.errors import printable


class _Console(Console):
    """Markup off: a participant can sign up as "[/x]"@x.com, and rich would read the brackets as markup and crash
    the command; styles are given as Text, never as markup in a string. Every string it renders (printed, or a
    table cell) has its control characters written out (`printable`); Text built here uses `printable` itself."""

    def __init__(self, **options):
        super().__init__(markup=False, highlight=False, **options)

    def render_str(self, text: str, **options):
        return super().render_str(printable(text), **options)


console = _Console()
err = _Console(stderr=True)
