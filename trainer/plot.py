"""``genenv-train plot RUN_DIR``: the curriculum of a run as one PNG (``RUN_DIR/curriculum.png``).

Panels: p̂ distribution per iteration (stacked histogram bins, with the α band marked), mean R_env and agent
reward, and pool growth (seed vs generated) with admitted / rejected generations.
"""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["plot_run"]


def plot_run(run_dir: Path) -> Path:
    """Read ``metrics.jsonl`` and write ``curriculum.png``; returns its path.

    Raises:
        FileNotFoundError: no ``metrics.jsonl`` in ``run_dir``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: is {run_dir} a genenv-train run directory?")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    from omegaconf import OmegaConf

    from genenv.trainer.settings import curriculum_settings, default_config

    config = Path(run_dir) / "config.yaml"  # the run's own (keys it lacks: the defaults); none: the defaults
    cur = curriculum_settings(OmegaConf.merge(default_config(), OmegaConf.load(config)) if config.is_file()
                              else default_config())
    alpha, k_min = cur.alpha, cur.k_min
    from matplotlib.ticker import MaxNLocator
    its = [r["iteration"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    hist = np.array([r["p_hat/histogram"] for r in rows], dtype=float)
    share = hist / np.maximum(hist.sum(axis=1, keepdims=True), 1)
    ax = axes[0]
    im = ax.imshow(share.T, origin="lower", aspect="auto", extent=[min(its) - 0.5, max(its) + 0.5, 0, 1],
                   cmap="viridis")
    ax.axhspan(max(0.0, alpha - k_min), min(1.0, alpha + k_min), color="white", alpha=0.15,
               label=f"α band {alpha:g}±{k_min:g}")
    ax.plot(its, [r["p_hat/mean"] for r in rows], "w.-", label="mean p̂")
    ax.set(xlabel="iteration", ylabel="success rate p̂", title="p̂ distribution of rolled-out tasks (α band shaded)")
    fig.colorbar(im, ax=ax, label="share of tasks")
    ax.legend(loc="upper right")
    ax = axes[1]
    ax.plot(its, [r["r_env/mean"] for r in rows], "o-", label="R_env (all generations)")
    ax.plot(its, [r["r_env/mean_admitted"] for r in rows], "s--", label="R_env (admitted)")
    ax.plot(its, [r["agent/reward_mean"] for r in rows], "^-", label="agent reward")
    ax.plot(its, [r["p_hat/in_band_share"] for r in rows], "x:", label="share in α band")
    ax.set(xlabel="iteration", ylim=(0, 1.05), title="rewards")
    ax.legend()
    ax = axes[2]
    ax.bar(its, [r.get("pool/seed", 0) for r in rows], label="seed tasks")
    ax.bar(its, [r.get("pool/generated", 0) for r in rows], bottom=[r.get("pool/seed", 0) for r in rows],
           label="generated tasks")
    ax2 = ax.twinx()
    ax2.plot(its, [r["gen/admitted"] for r in rows], "g^-", label="admitted")
    ax2.plot(its, [r["gen/rejected"] for r in rows], "rv-", label="rejected")
    ax.set(xlabel="iteration", ylabel="pool size", title="task pool growth")
    ax2.set_ylabel("generations this iteration")
    ax.legend(loc="upper left")
    ax2.legend(loc="lower right")
    for a in axes:
        a.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    out = Path(run_dir) / "curriculum.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
