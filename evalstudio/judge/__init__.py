"""LLM judges beside the human raters: the annotators' instrument as the prompt (instrument), an OpenAI-compatible
client with a resumable cache (client), judging and combining answers (run), and the files a run writes
(outputs). `evalstudio judge` is the command."""
