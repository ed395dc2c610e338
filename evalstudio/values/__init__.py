"""The values a protocol works with, below the registry: what a labeling config's controls accept (`controls`:
ranges and steps), the answers Label Studio stores and the checks of a value against its control (`results`), and
the helpers that read an input record's fields (`sources`), which the protocol importers (`importers/`) use.
Uses evalstudio.base only."""
