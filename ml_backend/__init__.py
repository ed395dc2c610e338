"""ML backend serving model-assisted prelabels for every protocol (next milestone)."""
