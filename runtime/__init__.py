"""The runtime: policies (local transformers, an OpenAI-compatible endpoint, the oracle), model loading, the one
episode loop, the veRL agent loop over it, and greedy evaluation. The trainer and the leaderboard both build on it;
it imports nothing else of the trainer."""
