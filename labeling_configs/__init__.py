"""Label Studio labeling configs, one XML per protocol (package data)."""
