"""The co-evolution trainer: task pool, policies and back-ends, veRL GRPO / RWR updates, the loop and CLI."""
