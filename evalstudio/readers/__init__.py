"""Ratings files from anywhere, for `evalstudio analyze`: flat tables (`ratings`), nested JSON as published
(`nested`) and pairwise comparisons (`comparisons`), each read into the tidy long frame the statistics take."""
