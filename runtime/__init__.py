"""The runtime: policies (local transformers, an OpenAI-compatible endpoint, the oracle), model loading, the one
episode loop, the veRL agent loop over it, greedy evaluation, and samplers backed by real inference engines
(`samplers`). The trainer and the leaderboard both build on it; it imports nothing else of the trainer."""

__all__ = [  # what a user may import: the public modules
    "attention", "continuous", "decoding", "episodes", "evaluation", "grammar", "kv_cache", "models", "policies",
    "prefix_cache", "processes", "samplers", "serve", "threads",
]
