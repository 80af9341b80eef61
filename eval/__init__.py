"""The leaderboard: ``genenv-eval`` and its report (result files, Markdown table, bar chart)."""

__all__ = [  # what a user may import: the public modules
    "baselines", "envs_cli", "leaderboard", "model_server", "report",
]
