"""ML backend (label-studio-ml) prefilling every protocol: stored model outputs, a learner, or an LLM judge."""
