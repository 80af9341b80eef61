"""The unit of every policy update: `Sample`, one scored sequence (the agent's episodes, the environment
policy's generations), used by the advantage estimators, the update, the engines and the loop."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from genenv.runtime.episodes import Trajectory

__all__ = ["Sample", "agent_samples"]


@dataclass
class Sample:
    """One scored sequence for an update: token ids, scalar ``reward`` and its group key ``uid``.

    ``weight`` is used by RWR (``exp(λ·R)``); ``response_mask`` (multi-turn episodes) marks the policy's own
    tokens with 1 and environment tokens with 0 (``None``: every response token is the policy's); ``episode``
    names the episode a per-turn sequence belongs to (GRPO counts an episode once; ``None``: its own episode);
    ``rollout_logprobs`` the sampler's log-prob of each response token (0.0 on environment tokens; ``None``: the
    sampler reported none), compared with the trainer's in the update's metrics.
    """

    prompt_ids: list[int]
    response_ids: list[int]
    reward: float
    uid: str
    weight: float = 1.0
    response_mask: list[int] | None = None
    episode: str | None = None
    rollout_logprobs: list[float] | None = None


def agent_samples(trajectories: Sequence["Trajectory"]) -> list[Sample]:
    """The agent's update samples: each episode's sequences (`segments`),
    rewarded with its return, grouped by task (``uid`` = task id), one episode counted once (``episode`` =
    ``<task id>#<sample index>``), with the sampler's log-probs where the episode has them."""
    samples = []
    for t in trajectories:
        episode = f"{t.task.id}#{t.sample_index}"
        for seg in t.segments():
            samples.append(Sample(seg.prompt_ids, seg.response_ids, t.reward, t.task.id,
                                  response_mask=seg.response_mask, episode=episode,
                                  rollout_logprobs=list(seg.response_logprobs) or None))
    return samples
