"""The crowd study: its parts, gold questions and bonuses (`study`), its participants (`participants`) and the
study's ledger in a database (`ledger`, `ledger_store`, `ledger_schema`), which decides who may answer what, once,
and when. The gateway (`evalstudio.gateway`) serves participants on top of it. Uses evalstudio.base,
evalstudio.stats (routing's posteriors) and evalstudio.protocols (a study's rules); SQLite or PostgreSQL."""
