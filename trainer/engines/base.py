"""The engine interface the co-evolution loop calls, the policy roles, and the reuse of a role's unchanged
checkpoint files."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Protocol, Sequence

from genenv.envs.task import Task
from genenv.runtime.episodes import Rollout, RolloutSpec
from genenv.runtime.policies import Policy
from genenv.trainer.updates import Sample

__all__ = ["Backend", "ROLES", "reuse_saved_role"]

ROLES = ("agent", "env_policy")
"""The two policies: the agent policy (solves tasks) and the environment policy (writes tasks)."""


class Backend(Protocol):
    """Every method the loop calls, per role (one of `ROLES`).

    One capability is optional: ``trial(role)``, a context manager inside which ``update`` calls of ``role`` are
    undone on exit (weights, optimiser state, update count). The ``grounded`` task source needs it
    (`GroundedSource`); the ``local`` engine has it.
    """

    def policy(self, role: str) -> Policy:
        """A `Policy` that samples from the role's current weights."""

    def rollout(self, tasks: Sequence[Task], spec: RolloutSpec) -> Rollout:
        """``spec.n`` agent episodes per task (``spec.group_sizes`` where tasks differ: one batch) through the one
        episode loop, sampled as ``spec`` says; returns the trajectories and the seconds spent generating and
        stepping envs (together as ``generate_seconds`` where the engine cannot separate them)."""

    def update(self, role: str, samples: Sequence[Sample], estimator: str) -> dict[str, Any]:
        """One update of ``role`` on scored samples (``estimator``: a registered advantage estimator, ``grpo`` or ``rwr``), then
        a refresh of its sampling weights unless the update was skipped. Returns the update's metrics."""

    def save(self, path: Path, previous: Path | None = None) -> None:
        """Write both policies (weights or adapters, tokenizers, optimiser states) under ``path``; ``previous``: the
        last complete checkpoint, whose files a role not updated since may share (`reuse_saved_role`)."""

    def load(self, path: Path) -> None:
        """Restore what `save` wrote."""

    def fingerprint(self, role: str) -> float:
        """Sum of squares of the role's trainable weights (float64): changes whenever an update changed them."""


def reuse_saved_role(previous: Path | None, path: Path, role: str, mark: dict[str, Any]) -> bool:
    """Hard-link ``previous/<role>/`` into ``path/<role>/`` when ``previous/backend.json`` records the role with the
    same ``mark`` (the local engine's: its update ``step``, which moves the optimiser state, and its weights'
    ``fingerprint``, which catches weights changed outside an update); returns whether it did. A role the
    difficulty filter or a frozen task source left alone costs no bytes and no write time. Files are copied where
    the filesystem cannot link them.

    Raises nothing for a missing or unreadable ``previous``: the role is then written anew (``False``).
    """
    if previous is None or not (Path(previous) / role).is_dir() or not mark:
        return False
    try:
        saved = json.loads((Path(previous) / "backend.json").read_text())[role]
    except (OSError, ValueError, KeyError):
        return False
    if not isinstance(saved, dict) or any(saved.get(k) != v for k, v in mark.items()):
        return False

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(Path(previous) / role, Path(path) / role, copy_function=link)
    return True
