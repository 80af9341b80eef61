"""A memory plan for the local engine before it loads anything: each role's bytes against the free GPU memory.

What the local engine holds per role (`LocalBackend`), in bytes per
parameter ``P`` (``T`` = trainable parameters: ``P`` for a full fine-tune, the LoRA adapters' count otherwise):

- full fine-tune: float32 master weights ``4P``, AdamW's two moments ``8T``, gradients ``4T``, the frozen
  reference ``4P`` (``2P`` in bfloat16 where the engine computes in bfloat16: its matmuls run in bfloat16 under
  autocast anyway), the bfloat16 sampling copy ``2P`` (only under bfloat16 autocast);
- LoRA: the frozen base ``4P`` (``2P`` in bfloat16 under bfloat16 autocast), the adapters ``4T`` with AdamW ``8T`` and
  gradients ``4T``; no reference copy (the base with the adapter disabled) and no sampling copy.

Activations, the KV cache of generation and CUDA's own context come on top: the plan keeps `HEADROOM` of
the free memory for them. Parameter counts come from the model's ``config.json`` on the meta device (no weights
are read; LoRA's ``all-linear`` targets every ``nn.Linear`` but the output head, as PEFT does).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["GIB", "MemoryPlanError", "check_fits", "model_config", "parameter_counts", "plan_role"]

GIB = 1024 ** 3
HEADROOM = 0.15
"""Share of the free GPU memory the plan leaves for activations, generation's KV cache and allocator slack."""


class MemoryPlanError(RuntimeError):
    """The roles do not fit on the device; the message gives each role's bytes and the options with their sizes."""


@dataclass(frozen=True)
class RolePlan:
    """Bytes one role holds (see the module docstring): ``params`` (``P``), ``trainable`` (``T``), and the parts
    ``weights``, ``reference``, ``sampling``, ``optimizer``, ``gradients`` (bytes)."""

    role: str
    mode: str
    params: int
    trainable: int
    weights: int
    reference: int
    sampling: int
    optimizer: int
    gradients: int

    @property
    def total(self) -> int:
        """All parts together, in bytes."""
        return self.weights + self.reference + self.sampling + self.optimizer + self.gradients


def parameter_counts(config, lora_r: int = 0) -> tuple[int, int]:
    """``(P, T)`` of a model built from a transformers ``config`` on the meta device: all parameters, and the
    trainable ones (``P`` without LoRA; ``r · (in + out)`` summed over every ``nn.Linear`` but ``lm_head`` with
    LoRA rank ``lora_r``)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters())  # tied embeddings counted once
    if lora_r <= 0:
        return params, params
    lora = sum(lora_r * (m.in_features + m.out_features) for name, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and not name.endswith("lm_head"))
    return params, lora


def plan_role(role: str, params: int, trainable: int, lora_r: int, bf16: bool) -> RolePlan:
    """The `RolePlan` of one role with ``params`` / ``trainable`` parameters; ``bf16``: the engine computes
    in bfloat16 (reference / LoRA base in bfloat16, a bfloat16 sampling copy for a full fine-tune)."""
    low = 2 if bf16 else 4
    if lora_r > 0:
        return RolePlan(role, f"LoRA r={lora_r}", params, trainable, weights=low * params + 4 * trainable,
                        reference=0, sampling=0, optimizer=8 * trainable, gradients=4 * trainable)
    return RolePlan(role, "full fine-tune", params, params, weights=4 * params, reference=low * params,
                    sampling=2 * params if bf16 else 0, optimizer=8 * params, gradients=4 * params)


def model_config(name: str, role: str = "agent"):
    """The transformers config of model ``name`` (a SmolLM2 alias, folder or checkpoint, whose ``role`` is read:
    `resolve_model_path`); no weights are read."""
    from transformers import AutoConfig

    from genenv.runtime.models import resolve_model_path

    return AutoConfig.from_pretrained(resolve_model_path(name, role))


def describe(plans: list[RolePlan]) -> str:
    """One line per role: mode, parameters and GiB per part."""
    return "\n".join(
        f"  {p.role}: {p.mode}, {p.params / 1e9:.2f} B parameters, {p.total / GIB:.1f} GiB (weights "
        f"{p.weights / GIB:.1f}, reference {p.reference / GIB:.1f}, sampling copy {p.sampling / GIB:.1f}, AdamW "
        f"{p.optimizer / GIB:.1f}, gradients {p.gradients / GIB:.1f})" for p in plans)


def check_fits(roles: Mapping[str, Any], free_bytes: int, bf16: bool, device: str = "cuda") -> list[RolePlan]:
    """Plan ``roles`` (``RoleConfig``-like: ``model``, ``lora_r``) and refuse when they need more than
    ``(1 - HEADROOM) · free_bytes``.

    Returns:
        the plans (they fit).
    Raises:
        MemoryPlanError: they do not fit; the message lists each role's plan and what the options would need
            (LoRA r=16 for every role, a smaller model, the ``verl_ray`` engine across GPUs).
    """
    configs = {role: model_config(rc.model, role) for role, rc in roles.items()}
    plans = [plan_role(role, *parameter_counts(configs[role], rc.lora_r), rc.lora_r, bf16) for role, rc in roles.items()]
    need, budget = sum(p.total for p in plans), int((1 - HEADROOM) * free_bytes)
    if need <= budget:
        return plans
    lora = [plan_role(role, *parameter_counts(configs[role], 16), 16, bf16) for role in roles]
    raise MemoryPlanError(
        f"the two roles need {need / GIB:.1f} GiB on {device}, {free_bytes / GIB:.1f} GiB free "
        f"({budget / GIB:.1f} GiB after {HEADROOM:.0%} headroom for activations and the KV cache):\n"
        f"{describe(plans)}\n"
        f"options:\n"
        f"  LoRA for every role (agent.policy.lora_r=16 env_policy.policy.lora_r=16): "
        f"{sum(p.total for p in lora) / GIB:.1f} GiB\n"
        f"  a smaller model for a role (agent.policy.model=... / env_policy.policy.model=...)\n"
        f"  engine=verl_ray: FSDP shards weights and optimiser states over several GPUs (docs/distributed.md)")
