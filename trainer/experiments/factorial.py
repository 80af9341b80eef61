"""The held-out outcome of a 2x2 arm design, a lever crossed with the writer: does a setting (the *lever*, e.g.
``generation.rollouts_per_task=8``) raise the agent's held-out score, and how much of that needs a *trained*
environment policy? Computed from the arms' ``metrics.jsonl`` and the experiment's ``baseline.json`` alone.

The four arms of one experiment, paired by seed: ``trained`` (``genenv``), ``frozen`` (``random_env``: the same
environment policy, never updated) and each with the lever on (``genenv_n8``, ``random_env_n8``). Per seed and arm
the **AUC** (`genenv.trainer.experiments.report.run_auc`: the mean held-out score over training, against
agent tasks consumed, from the untrained agent's score) and the **final** held-out score. Three contrasts, each
treatment − control per seed (`CONTRASTS`):

- ``lever, writer trained``: trained with the lever − trained;
- ``lever, writer frozen``: frozen with the lever − frozen;
- ``writer, lever off``: trained − frozen.

**Tested** (the family): the three AUC contrasts, each over seeds (mean with its 95 % t interval, exact two-sided
sign-flip test, `seed_test`), Holm-corrected together
(`correct`). **Described, not tested**: the writer's share of the lever,
(trained with lever − trained) − (frozen with lever − frozen) per seed with its 95 % t interval; the contrasts'
final-score differences with their intervals; each arm's final score per difficulty bin (metric keys holding
``=``, e.g. ``heldout/twx/coin/graded/steps=7+``); each contrast's (seed, evaluation) cells with their
intraclass correlation (`cell_summary`). This is the statistic
pre-registered for the confirmatory run in ``docs/results.md``.

The stop rule is kept by `analyse`: it refuses to compute anything while a planned seed (the experiment's
``seeds``) has not finished in all four arms, unless asked for a partial look (``partial=True``). Everything but
the writer's share is `genenv.trainer.experiments.contrasts`' statistic of the three contrasts.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from genenv.trainer.experiments import contrasts
from genenv.trainer.experiments.contrasts import described_lines, final_bins, interval_text, per_seed_text, tested_rows
from genenv.trainer.experiments.stats import mean_interval

__all__ = ["CONTRASTS", "DEFAULT_ARMS", "analyse", "cli", "final_bins", "markdown"]

ROLES = ("trained", "frozen", "trained_lever", "frozen_lever")
DEFAULT_ARMS = ("genenv", "random_env", "genenv_n8", "random_env_n8")  # the confirmatory run's, in ROLES order
CONTRASTS = {"lever, writer trained": ("trained_lever", "trained"),
             "lever, writer frozen": ("frozen_lever", "frozen"),
             "writer, lever off": ("trained", "frozen")}  # name -> (treatment role, control role)


def analyse(experiment_dir: Path, arms: Sequence[str] = DEFAULT_ARMS, partial: bool = False,
            mixed_code: bool = False) -> dict[str, Any]:
    """The 2x2 outcome statistic (module docstring) of one experiment folder.

    Args:
        experiment_dir: a ``genenv-experiment`` folder (``experiment.yaml``, ``baseline.json``, ``<arm>/seed<k>``).
        arms: the four arm names in `ROLES` order (trained, frozen, trained with the lever, frozen with it).
        partial: compute over the seeds finished in all four arms even when a planned seed is missing (a look
            that a stop rule forbids; the result says ``complete: False``).
        mixed_code: compare arms whose sittings recorded different code
            (`check_paired`).
    Returns:
        `genenv.trainer.experiments.contrasts.analyse`'s result for the three `CONTRASTS` with ``arms`` as role →
        arm, and ``writer_share`` (``per_seed`` and ``difference``: mean with its 95 % t interval, AUC units).
    Raises:
        FileNotFoundError: no ``experiment.yaml`` or no ``baseline.json`` in ``experiment_dir``.
        ValueError: not four distinct arms; an arm is not in the experiment's ``arms``; no seed finished in all
            four; a planned seed is missing and ``partial`` is false; the arms ran different code and
            ``mixed_code`` is false.
    """
    arms = tuple(arms)
    if len(arms) != len(ROLES) or len(set(arms)) != len(ROLES):
        raise ValueError(f"a 2x2 design needs four distinct arms ({', '.join(ROLES)}), got {list(arms)}")
    role = dict(zip(ROLES, arms))
    result = contrasts.analyse(experiment_dir, {name: (role[t], role[c]) for name, (t, c) in CONTRASTS.items()},
                               partial, mixed_code, order=arms)
    on_trained, on_frozen = (result["tests"][n]["per_seed"] for n in ("lever, writer trained", "lever, writer frozen"))
    share = {s: on_trained[s] - on_frozen[s] for s in result["seeds"]}
    result.update(arms=role, writer_share={"per_seed": share, "difference": mean_interval(list(share.values()))})
    return result


def markdown(result: dict[str, Any]) -> list[str]:
    """`analyse`'s result as markdown lines: what was compared, the tested family (AUC per contrast: per-seed
    differences, mean [95 % t], p over seeds, Holm's p), then the described figures; differences in points (100 x
    score units)."""
    role, seeds = result["arms"], result["seeds"]
    arms = ", ".join(f"{r} = `{a}`" for r, a in role.items())
    share = result["writer_share"]
    return [f"## Lever x writer, held-out outcome ({result['experiment']}, {result['key']})", "",
            f"Arms: {arms}. Seeds finished in all four: {len(seeds)} ({', '.join(map(str, seeds))}); "
            + ("every planned seed." if result["complete"] else f"**partial look**, missing {result['missing']}."),
            f"Untrained agent: {100 * result['baseline']:.1f} %. Runs' {result['code']}.", "",
            "### Tested: AUC per seed, treatment − control (points), Holm over the three", "",
            *tested_rows(result, {name: (role[t], role[c]) for name, (t, c) in CONTRASTS.items()}),
            *described_lines(result, list(role.values()), first=[
                f"- The writer's share of the lever (AUC, (`{role['trained_lever']}` − `{role['trained']}`) − "
                f"(`{role['frozen_lever']}` − `{role['frozen']}`)): {interval_text(share['difference'])} points; "
                f"{per_seed_text(share['per_seed'])}."])]


def cli(argv: Sequence[str]) -> int:
    """``genenv-experiment factorial EXPERIMENT [--arms T F TL FL] [--partial] [--json FILE] [--cache DIR]
    [--mixed-code]``: print `markdown` of `analyse`; exit 2 with a message on an unreadable folder,
    a missing arm or seed."""
    prog = "genenv-experiment factorial"
    ap = contrasts.parser(prog, "held-out outcome of a lever crossed with the writer (2x2 arms, paired by seed; the "
                                "seed is the unit)")
    ap.add_argument("--arms", nargs=4, default=list(DEFAULT_ARMS), metavar=("TRAINED", "FROZEN", "TRAINED_LEVER",
                                                                            "FROZEN_LEVER"),
                    help=f"the four arms (default: {' '.join(DEFAULT_ARMS)})")
    args = ap.parse_args(list(argv))
    return contrasts.run_command(prog, args, lambda folder: analyse(folder, args.arms, args.partial, args.mixed_code),
                                 markdown)
