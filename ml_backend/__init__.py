"""ML backend (label-studio-ml) prefilling every protocol: stored model outputs, a learner, or an LLM judge; and
`/generate`, model outputs written into input records. Uses evalstudio.protocols, values, labelstudio, base.chat
and exporters.tables (answers read as the tidy frame reads them); served as its own process (WSGI)."""
