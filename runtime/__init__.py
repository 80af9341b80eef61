"""The runtime: policies (local transformers, an OpenAI-compatible endpoint, the gold policy), model loading, the one
episode loop, the veRL agent loop over it, greedy evaluation, and the one sampler interface with the engines behind
it (`samplers`; the project's own CPU engine is the private `_builtin`). The trainer and the leaderboard both build
on it; it imports nothing else of the trainer."""

__all__ = [  # what a user may import: the public modules
    "episodes", "evaluation", "grammar", "models", "policies", "processes", "samplers", "serve", "threads",
]
