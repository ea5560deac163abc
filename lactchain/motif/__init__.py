"""LLM-judged rewards (Motif): captioned episodes, the judge, and agents trained on its reward."""
