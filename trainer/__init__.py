"""The co-evolution trainer: task pool, policies and back-ends, veRL GRPO / RWR updates, the loop and CLI."""

__all__ = [  # what a user may import: the public modules
    "checkpoint", "cli", "engines", "experiments", "generation", "loop", "metrics", "plot", "settings",
    "strategies", "task_pool", "updates",
]
