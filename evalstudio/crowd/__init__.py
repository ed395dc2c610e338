"""The crowd study: its parts, gold questions and bonuses (`study`), its participants (`participants`) and the
study's ledger in a database (`ledger`, `ledger_store`, `ledger_schema`), which decides who may answer what, once,
and when. The gateway (`evalstudio.gateway`) serves participants on top of it."""
