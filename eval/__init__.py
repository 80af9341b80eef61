"""The leaderboard: ``genenv-eval`` and its report (result files, Markdown table, bar chart)."""
