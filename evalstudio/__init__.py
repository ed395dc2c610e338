"""evalstudio: published human-evaluation protocols as ready-to-run Label Studio projects. Its rooms, each on a
floor that uses only its own and those below (docs/layout.md, tests/test_layering.py): cli, operations, judge,
gateway, tasks, ml_backend, exporters, crowd, labelstudio and readers, protocols, importers, values, base and stats."""

__version__ = "0.1.0"
