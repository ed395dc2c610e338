"""LLM judges beside the human raters: the annotators' instrument as the prompt (instrument), judging and combining
answers (run), and the files a run writes (outputs). The OpenAI-compatible client with its resumable cache is
evalstudio.base.chat (the ML backend's `generate` uses it too). `evalstudio judge` is the command. Uses evalstudio.gateway (an answer's checks), values, protocols, tasks
(lists), exporters.tables (the files) and base."""
