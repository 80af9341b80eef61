"""The engine interface the co-evolution loop calls, and the policy roles."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, Sequence

from genenv.envs.task import Task
from genenv.trainer.rollout.episodes import Trajectory
from genenv.trainer.rollout.policies import Policy
from genenv.trainer.updates import Sample

ROLES = ("agent", "env_policy")
"""The two policies: the agent policy (solves tasks) and the environment policy (writes tasks)."""


class Backend(Protocol):
    """Every method the loop calls, per role (one of :data:`ROLES`)."""

    def policy(self, role: str) -> Policy:
        """A :class:`~genenv.trainer.rollout.policies.Policy` that samples from the role's current weights."""

    def rollout(self, tasks: Sequence[Task], n: int, temperature: float, max_new_tokens: int,
                env_kwargs: dict[str, dict[str, Any]], max_response_tokens: int | None = None,
                stats: dict[str, float] | None = None) -> list[Trajectory]:
        """``n`` agent episodes per task through the one episode loop; adds ``generate_seconds`` and
        ``env_seconds`` to ``stats`` where the engine can separate them."""

    def update(self, role: str, samples: Sequence[Sample], mode: str) -> dict[str, Any]:
        """One update of ``role`` on scored samples (``mode``: an advantage estimator, ``grpo`` or ``rwr``), then
        a refresh of its sampling weights unless the update was skipped. Returns the update's metrics."""

    def save(self, path: Path) -> None:
        """Write both policies (weights or adapters, tokenizers, optimiser states) under ``path``."""

    def load(self, path: Path) -> None:
        """Restore what :meth:`save` wrote."""

    def fingerprint(self, role: str) -> float:
        """Sum of squares of the role's trainable weights (float64): changes whenever an update changed them."""
