"""evalstudio: published human-evaluation protocols as ready-to-run Label Studio projects."""

__version__ = "0.1.0"
