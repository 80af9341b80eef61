"""The ``local`` engine: both policies in this process with transformers, on the CPU or one GPU.

`LocalBackend` implements `Backend`. It holds both policies in one process
with transformers: float32 master weights (bf16 updates of size lr·g ≈ 1e-6 would round away); where the device
computes bfloat16 natively (``autocast_dtype: auto``), a bf16 sampling copy per role refreshed after each update
and bf16 autocast for the log-prob and gradient passes, else float32 throughout; a frozen reference copy per role
for the KL leash (or, with LoRA, the base model under ``disable_adapter``); AdamW. Under bf16 autocast the frozen
weights (the reference copy, LoRA's base) are held in bf16: autocast runs their matmuls in bf16 anyway.

On a GPU the roles' memory is planned before anything loads (`genenv.trainer.engines.memory`): a pair that
does not fit is refused with each role's bytes and the options, instead of an out-of-memory error mid-load.
"""
from __future__ import annotations

import copy
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch

from genenv.envs.task import Task
from genenv.trainer.engines.base import reuse_saved_role
from genenv.runtime.episodes import Rollout, RolloutSpec, play_episodes
from genenv.runtime.models import low_precision_copy, weights_version
from genenv.runtime.samplers.sampler import SAMPLERS, Sampler, make_sampler
from genenv.trainer.settings import RoleConfig, checked_run_settings
from genenv.trainer.updates import Sample, policy_update

__all__ = ["LocalBackend", "RoleConfig", "build_local_backend"]

class LocalBackend:
    """Both policies in this process (CPU by default, one GPU with ``device="cuda"``).

    Args:
        roles: ``{"agent": RoleConfig, "env_policy": RoleConfig}``.
        device: ``"cpu"`` or ``"cuda"``.
        autocast_dtype: ``"auto"`` (default: bfloat16 where the device computes it natively, else float32;
            `resolve_dtype`), ``"bfloat16"``, or ``None`` / ``"float32"`` for
            pure float32.
        threads: torch intra-op threads on CPU (both roles share them; they never run at the same time): a
            number, or ``"auto"`` / ``None``: the usable cores less those other processes keep busy when the run
            starts (`prepare_cpu`).

    Where the agent's episodes are played (this process, worker processes or a ``genenv-serve`` server) is the
    `RolloutSpec`'s, given with each `rollout`.
    """

    def __init__(self, roles: dict[str, RoleConfig], device: str = "cpu", autocast_dtype: str | None = "auto",
                 threads: int | str | None = "auto"):
        from genenv.runtime.models import resolve_dtype
        from genenv.runtime.threads import prepare_cpu

        self.threads = prepare_cpu(threads)
        self.roles = roles
        self.device = device
        dtype = resolve_dtype(autocast_dtype, device)
        self.autocast_dtype = None if dtype == "float32" else dtype
        self.models: dict[str, Any] = {}
        self.refs: dict[str, Any] = {}
        self.tokenizers: dict[str, Any] = {}
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        self.policies: dict[str, Sampler] = {}
        self.rollout_models: dict[str, Any] = {}
        self.memory_plan = None  # on a GPU: the roles' RolePlans, checked before anything loads
        self.steps = {role: 0 for role in roles}  # updates applied per role (a checkpoint reuses unchanged roles)
        self._fingerprints: dict[str, tuple[tuple[int, int], float]] = {}  # role -> (weights version, value)
        self._loaded: dict[str, tuple[int, int] | None] = {}  # role -> weights version as loaded from its model
        if str(device).startswith("cuda"):
            from genenv.trainer.engines.memory import check_fits

            self.memory_plan = check_fits(roles, torch.cuda.mem_get_info(torch.device(device))[0],
                                          bf16=self.autocast_dtype is not None, device=device)
        for role, rc in roles.items():
            self._build(role, rc, weights=None)

    def _build(self, role: str, rc: RoleConfig, weights: Path | None) -> None:
        from transformers import AutoModelForCausalLM

        from genenv.runtime.models import load_model_and_tokenizer

        base, tok = load_model_and_tokenizer(rc.model, dtype="float32", device=self.device, role=role)
        frozen_dtype = getattr(torch, self.autocast_dtype) if self.autocast_dtype else torch.float32
        if rc.lora_r > 0:
            from peft import LoraConfig, PeftModel, get_peft_model

            base = low_precision_copy(base, frozen_dtype)  # the frozen base; PEFT keeps the adapters in float32
            if weights is not None:
                model = PeftModel.from_pretrained(base, str(weights), is_trainable=True)
            else:
                model = get_peft_model(base, LoraConfig(r=rc.lora_r, lora_alpha=rc.lora_alpha,
                                                        target_modules="all-linear", task_type="CAUSAL_LM"))
            self.refs[role] = None  # the reference is the base model with the adapter disabled
        else:
            self.refs[role] = low_precision_copy(base, frozen_dtype)
            model = base
            if weights is not None:
                model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.float32).to(self.device)
                model.generation_config.pad_token_id = tok.pad_token_id
        model.eval()
        old = self.policies.pop(role, None)
        if old is not None:  # a rebuild (`load`): the old sampler's server or KV states go
            old.close()
        self.models[role], self.tokenizers[role] = model, tok
        self._fingerprints.pop(role, None)  # a new model object: its id may be a freed one's
        # a full fine-tune loaded from its model file is rebuilt exactly from it (a LoRA adapter starts random)
        self._loaded[role] = weights_version(model) if weights is None and rc.lora_r == 0 else None
        self.optimizers[role] = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=rc.lr,
                                                  weight_decay=0.0)
        if rc.lora_r > 0 or not self.autocast_dtype or rc.sampler in ("llama-server", "vllm"):
            # LoRA: sample from the adapter model itself under autocast (no merged copy to keep in sync);
            # a server sampler holds its own copy, written from the master weights
            rollout, amp = model, self.autocast_dtype
        else:
            # a low-precision copy for sampling, refreshed after every update (cf. veRL's weight sync to vLLM):
            # autocast would re-cast every fp32 weight at each decoding step
            rollout, amp = low_precision_copy(model, getattr(torch, self.autocast_dtype)), None
        self.rollout_models[role] = rollout
        self.policies[role] = make_sampler(rc.sampler, rollout, tok, rc.model, device=self.device,
                                           batch_size=rc.gen_batch_size, autocast_dtype=amp,
                                           prefix_cache_tokens=rc.prefix_cache_tokens,
                                           continuous_batching=bool(rc.continuous_batching),
                                           static_cache=bool(rc.static_cache), threads=self.threads,
                                           fingerprint=self.fingerprint(role))
        self.policies[role].name = f"{rc.model}:{role}"

    def sync_rollout_weights(self, role: str) -> float:
        """Load the role's updated master weights into its sampler (`Sampler.load_weights`: a copy into the
        sampling copy, nothing when the sampler samples from the master model itself, a GGUF written and the server
        restarted for ``llama-server``, safetensors written and reloaded in place for ``vllm``), named by their
        `fingerprint`; returns the seconds taken."""
        return self.policies[role].load_weights(self.models[role].state_dict(), self.fingerprint(role))

    def policy(self, role: str) -> Sampler:
        """The role's sampler (``<role>.policy.sampler``), kept in sync with the master weights."""
        return self.policies[role]

    def sampler_fingerprint(self, role: str) -> Any:
        """The fingerprint of the weights the role's sampler holds (`Sampler.fingerprint`): `fingerprint`'s value
        at its last sync, so it differs from `fingerprint` when the sampler kept stale weights."""
        return self.policies[role].fingerprint()

    def rollout(self, tasks: Sequence[Task], spec: RolloutSpec) -> Rollout:
        """The agent's episodes through `play_episodes`, each turn's prompts in calls of the agent's
        ``gen_batch_size`` rows."""
        policy = self.policies["agent"]
        return play_episodes(tasks, policy, spec, chunk_size=policy.batch_size)

    def close(self) -> None:
        """Stop what the samplers run (a ``llama-server`` process); idempotent."""
        for sampler in self.policies.values():
            sampler.close()

    def update(self, role: str, samples: Sequence[Sample], estimator: str) -> dict[str, Any]:
        """One `policy_update` of ``role``, then a refresh of its sampling copy."""
        rc, model = self.roles[role], self.models[role]
        ref = self.refs[role]
        metrics = policy_update(
            model, ref, self.optimizers[role], samples, self.tokenizers[role].pad_token_id, estimator=estimator,
            kl_coef=rc.kl_coef, clip_ratio=rc.clip_ratio, ppo_epochs=rc.ppo_epochs,
            micro_batch_size=rc.micro_batch_size, max_grad_norm=rc.max_grad_norm,
            autocast_dtype=getattr(torch, self.autocast_dtype) if self.autocast_dtype else None,
            ref_context=(model.disable_adapter if ref is None else None))
        if not metrics.get("skipped"):
            self.steps[role] += 1
            metrics["sync_seconds"] = self.sync_rollout_weights(role)
        return metrics

    @contextmanager
    def trial(self, role: str) -> Iterator[None]:
        """Undo on exit every `update` of ``role`` made inside the block: its trainable weights, AdamW state
        and update count are copied on entry and put back on exit (also on an error), then its sampling copy is
        refreshed. Costs one copy of the trainable weights and of the optimiser state (SmolLM2-135M full
        fine-tune: 0.54 GB + up to 1.08 GB). Used for the ``grounded`` task source's trial updates."""
        model, optimizer = self.models[role], self.optimizers[role]
        params = [p for p in model.parameters() if p.requires_grad]
        saved = [p.detach().clone() for p in params]
        state, steps = copy.deepcopy(optimizer.state_dict()), self.steps[role]
        try:
            yield
        finally:
            with torch.no_grad():
                for p, value in zip(params, saved):
                    p.copy_(value)
            optimizer.load_state_dict(state)
            self.steps[role] = steps
            self.sync_rollout_weights(role)

    def untrained(self, role: str) -> bool:
        """Whether ``role`` still holds the weights it was loaded with from its ``model`` (a full fine-tune never
        updated and never changed otherwise: a frozen task source's environment policy, or the agent of
        ``agent_batch=frozen``), so a checkpoint needs none of its bytes: its weights are the model file's and its
        AdamW holds no moments. A LoRA role is never untrained here (its adapter starts from random numbers)."""
        loaded = self._loaded.get(role)
        return loaded is not None and self.steps[role] == 0 and weights_version(self.models[role]) == loaded

    def save(self, path: Path, previous: Path | None = None) -> None:
        """Write ``<path>/<role>/`` (weights or LoRA adapter as safetensors, tokenizer, ``optimizer.pt``: AdamW's
        float32 moments, what exact resume needs) and ``backend.json`` (each role's settings, update ``step``,
        weights' ``fingerprint`` and ``saved``). A role whose step and fingerprint are those recorded in
        ``previous`` (the last checkpoint) shares its files by hard link
        (`reuse_saved_role`). An `untrained` role writes no folder
        (``saved: false``): `load` and `checkpoint_folder` take its weights from
        its ``model``. SmolLM2-135M: 0.54 GB of float32 weights not written for a frozen environment policy."""
        path.mkdir(parents=True, exist_ok=True)
        marks = {role: {"step": self.steps[role], "saved": False} if self.untrained(role) else
                 {"step": self.steps[role], "fingerprint": self.fingerprint(role), "saved": True}
                 for role in self.models}
        for role, model in self.models.items():
            if not marks[role]["saved"] or reuse_saved_role(previous, path, role, marks[role]):
                continue
            model.save_pretrained(path / role)
            self.tokenizers[role].save_pretrained(path / role)
            torch.save(self.optimizers[role].state_dict(), path / role / "optimizer.pt")
        (path / "backend.json").write_text(json.dumps(
            {r: {**vars(rc), **marks[r]} for r, rc in self.roles.items()}, indent=1))

    def load(self, path: Path) -> None:
        """Rebuild both roles from ``<path>/<role>/`` (frozen references re-loaded from the original model); a
        role saved without files (``saved: false``, `save`) is rebuilt from its ``model`` with a fresh
        AdamW, as it was when the run started."""
        saved = json.loads((path / "backend.json").read_text())
        for role, rc in self.roles.items():
            if saved[role].get("saved", True):
                self._build(role, rc, weights=path / role)
                self.optimizers[role].load_state_dict(torch.load(path / role / "optimizer.pt", weights_only=True))
            else:
                self._build(role, rc, weights=None)
            self.steps[role] = int(saved[role].get("step", 0))

    def fingerprint(self, role: str) -> float:
        """Sum of squares of the trainable weights (float64): changes whenever an update changed them. Computed
        once per weights version (`weights_version`; a pass over every weight, figures:
        ``lab/notes/cpu-profiles.md``, "trainer/engines/local.py"), so the loop's metrics and the checkpoint that
        follows share one pass."""
        model = self.models[role]
        version = weights_version(model)
        cached = self._fingerprints.get(role)
        if cached is None or cached[0] != version:
            with torch.no_grad():
                value = float(sum((p.double() ** 2).sum() for p in model.parameters() if p.requires_grad))
            cached = self._fingerprints[role] = (version, value)
        return cached[1]


def build_local_backend(settings) -> LocalBackend:
    """The ``local`` engine from the run's `RunSettings`: each role's
    `RoleConfig` and the `EngineSettings` (``device`` ``auto``: one GPU when
    present, else the CPU).

    Raises:
        TypeError: ``settings`` is not a `RunSettings`.
        ValueError: a role's ``sampler`` is not one of `SAMPLERS` (before any model loads).
    """
    st = checked_run_settings(settings, "build_local_backend")
    for role, rc in st.roles.items():
        if rc.sampler not in SAMPLERS:
            raise ValueError(f"config key {role}.policy.sampler is {rc.sampler!r}; choose one of {list(SAMPLERS)}")
    e = st.engine
    device = e.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return LocalBackend(st.roles, device=device, autocast_dtype=e.autocast_dtype, threads=e.threads)
