"""Ratings files from anywhere, for `evalstudio analyze`: flat tables (`ratings`), nested JSON as published
(`nested`) and pairwise comparisons (`comparisons`), each read into the tidy long frame the statistics take. Uses
evalstudio.base (hostile files, errors with their lines), values and protocols (a built-in protocol's criteria as
the spec); nothing of Label Studio."""
