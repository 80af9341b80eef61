"""``genenv-train``: the co-evolution trainer (Hydra) and ``genenv-train plot RUN_DIR``.

Examples:

    genenv-train benchmark=bfcl                       # CPU profile, SmolLM2 as agent and env policy
    genenv-train benchmark=bamboogle iterations=5 arm=random_env   # RandomEnv ablation (configs/arm/)
    genenv-train benchmark=bfcl run_dir=runs/a        # re-run the same command to resume after a crash
    genenv-train plot runs/a                          # curriculum plot → runs/a/curriculum.png
"""
from __future__ import annotations

import logging
import sys

from genenv.envs.extras import MissingExtra, require_extra

__all__ = ["compose_config", "main", "with_benchmark_configs"]

# what the trainer imports beyond the core install (the ``train`` extra of pyproject.toml)
TRAIN_MODULES = ("torch", "transformers", "verl", "hydra", "omegaconf", "peft", "xgrammar")


def with_benchmark_configs(overrides: list[str]) -> list[str]:
    """``overrides`` (Hydra command-line overrides) with the config packages that benchmark packages ship added to
    ``hydra.searchpath`` (`genenv.envs.registry.plugin_config_packages`, as ``pkg://<package>.configs``), so that
    ``benchmark=<name>`` and its optional ``benchmark_profile`` find a third-party benchmark's config with no
    Hydra option. A ``hydra.searchpath=[...]`` already given keeps its entries first; with no such package the
    overrides come back unchanged. Hydra reads ``hydra.searchpath`` only from the primary config or the command
    line, which is why it is an override here and not a key of ``configs/train.yaml`` (that
    ``configs/experiment.yaml`` composes)."""
    from genenv.envs.registry import plugin_config_packages

    extra = [f"pkg://{name}" for name in plugin_config_packages()]
    if not extra:
        return list(overrides)
    out, merged = [], False
    for override in overrides:
        key, sep, value = override.partition("=")
        if sep and key.lstrip("+") == "hydra.searchpath":
            given = [v.strip() for v in value.strip().strip("[]").split(",") if v.strip()]
            override = f"{key}=[{','.join(given + [e for e in extra if e not in given])}]"
            merged = True
        out.append(override)
    if not merged:
        out.append(f"hydra.searchpath=[{','.join(extra)}]")
    return out


def main() -> int:
    """Dispatch ``plot`` or run Hydra's main with ``configs/train.yaml``."""
    if len(sys.argv) > 1 and sys.argv[1] == "plot":
        from pathlib import Path

        from genenv.trainer.plot import plot_run

        if len(sys.argv) != 3:
            print("usage: genenv-train plot RUN_DIR", file=sys.stderr)
            return 2
        out = plot_run(Path(sys.argv[2]))
        print(out)
        return 0
    try:
        require_extra("train", *TRAIN_MODULES, needed_by="genenv-train")
    except MissingExtra as exc:
        print(f"genenv-train: {exc}", file=sys.stderr)
        return 1
    import hydra

    from genenv.envs.registry import plugin_failures

    for line in plugin_failures():  # a benchmark package that failed to import: said before Hydra's "not found"
        print(f"genenv-train: {line}", file=sys.stderr)
    sys.argv[1:] = with_benchmark_configs(sys.argv[1:])

    @hydra.main(config_path="../configs", config_name="train", version_base="1.3")
    def _run(cfg) -> None:
        from genenv.runtime.threads import prepare_cpu

        from genenv.trainer.settings import run_settings

        prepare_cpu(run_settings(cfg).engine.threads)  # before torch loads: the thread count, OpenMP's passive wait
        from genenv.runtime.processes import exit_on_sigterm
        from genenv.trainer.loop import CoEvolutionTrainer

        exit_on_sigterm()  # `kill PID` stops the run's inference server too

        logging.basicConfig(level=logging.INFO)
        trainer = CoEvolutionTrainer(cfg)
        rows = trainer.run()
        for row in rows:
            print(summary_line(row))
        print(f"run dir: {trainer.run_dir}")

    _run()
    return 0


def compose_config(overrides: list[str] | None = None, config_name: str = "train"):
    """The composed config ``configs/<config_name>.yaml`` (``train``: genenv-train, ``experiment``:
    genenv-experiment) for ``overrides`` (Hydra's compose API; for tests and notebooks), with benchmark packages'
    configs on the search path (`with_benchmark_configs`)."""
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="genenv.configs", version_base="1.3"):
        return compose(config_name=config_name, overrides=with_benchmark_configs(list(overrides or [])))


def summary_line(row: dict) -> str:
    """One human-readable line per iteration: rewards, p̂, R_env, admissions and the wall-time split."""
    t = {k.split("/", 1)[1]: v for k, v in row.items() if k.startswith("time/")}
    rej = {k.split("/", 2)[2]: v for k, v in row.items() if k.startswith("gen/rejected/")}
    return (f"iter {row['iteration']}: agent reward {row['agent/reward_mean']:.3f} | p̂ mean {row['p_hat/mean']:.2f} "
            f"hist {row['p_hat/histogram']} in-band {row['p_hat/in_band_share']:.2f} | R_env {row['r_env/mean']:.3f} | "
            f"admitted {row['gen/admitted']}/{row['gen/generated']} rejected {rej} | pool {row['pool/size']} | "
            "time " + " ".join(f"{k} {v:.1f}s" for k, v in t.items()))


if __name__ == "__main__":
    sys.exit(main())
