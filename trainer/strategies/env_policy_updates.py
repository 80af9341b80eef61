"""How a learning task source updates the environment policy (``env_policy.update_mode``), by name: which
generations update it, with what reward and which advantage estimator. The names are registered in
`genenv.trainer.strategies.ENV_POLICY_UPDATES` (a light table, so settings validate a name without importing
this module):

- ``rwr`` (the paper, §3): the admitted generations whose task's p̂ passed the difficulty filter
  ``|p̂ - α| ≤ k_min``, weighted ``exp(λ · R_env)`` (reward-weighted regression under the KL leash);
- ``grpo``: GRPO on R_env over *every* generation of each prompt (one group per generation prompt): rejected ones
  at R_env 0, admitted ones at R_env(p̂) whether inside the α band or not. The group mean is the baseline, so
  tasks that are too easy, too hard or invalid are pushed down and those nearer α pushed up (contrast the
  paper's RWR lacks: inside the band its weights differ by a few per cent, and it sees nothing outside it);
- ``drgrpo``: the same groups with Dr. GRPO's advantage ``R_env - mean(group)``, not divided by the group's
  standard deviation (`genenv.trainer.updates.advantages`), so a game at p̂ 0 or 1 among rejected ones
  (R_env 0.0067 at β = 20 against 0) moves the policy by its reward gap, not by a whole standardised unit.

Whether the environment policy is updated at all is its task source's (``task_source``: ``random_env``, ``envgen``
and ``static`` never update it; `genenv.trainer.strategies.task_sources`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from genenv.envs.tables import load_object
from genenv.trainer.generation import GenerationRecord
from genenv.trainer.updates import Sample
from genenv.trainer.updates.advantages import rwr_weights

__all__ = ["ScoredGeneration", "drgrpo", "env_policy_samples", "grpo", "rwr"]


@dataclass
class ScoredGeneration:
    """A generation with its environment reward: ``r_env`` (0 when rejected) and ``in_band`` (admitted and
    passed the difficulty filter)."""

    record: GenerationRecord
    r_env: float
    in_band: bool


Selector = Callable[[Sequence[ScoredGeneration], float], tuple[list[Sample], str | None]]


def env_policy_samples(name: str, scored: Sequence[ScoredGeneration], lam: float) -> tuple[list[Sample], str | None]:
    """The samples that update the environment policy under mode ``name`` and the advantage estimator to use.

    Raises:
        ValueError: unknown mode (the message lists the registered ones).
    """
    from genenv.trainer.strategies import ENV_POLICY_UPDATES

    return load_object(ENV_POLICY_UPDATES.lookup(name))(scored, lam)


def _sample(s: ScoredGeneration) -> Sample:
    gen = s.record.generation
    return Sample(gen.prompt_ids, gen.response_ids, s.r_env, f"prompt-{s.record.prompt_index}")


def rwr(scored: Sequence[ScoredGeneration], lam: float) -> tuple[list[Sample], str | None]:
    """In-band admitted generations, weighted ``exp(λ · R_env)``."""
    samples = [_sample(s) for s in scored if s.in_band and s.record.generation.response_ids]
    for sample, w in zip(samples, rwr_weights([s.reward for s in samples], lam)):
        sample.weight = w
    return samples, "rwr"


def grpo(scored: Sequence[ScoredGeneration], lam: float) -> tuple[list[Sample], str | None]:
    """Every generation with tokens, grouped by prompt: rejected ones at R_env 0, admitted ones at R_env(p̂)."""
    return [_sample(s) for s in scored if s.record.generation.response_ids], "grpo"


def drgrpo(scored: Sequence[ScoredGeneration], lam: float) -> tuple[list[Sample], str | None]:
    """The generations of ``grpo``, advantage ``R_env - mean(group)`` (Dr. GRPO: no division by the group's std)."""
    return grpo(scored, lam)[0], "drgrpo"
