"""A policy's in-memory weights as a GGUF file that llama.cpp loads: the weight sync of the llama.cpp sampler.

`write_gguf` takes a Llama-architecture Hugging Face model's state dict (the weights being trained) and a template
GGUF of the same architecture and shape (for SmolLM2, the embedded ``SmolLM2-135M-Instruct.Q4_1.gguf``), and writes
a new GGUF with the template's metadata (tokenizer, chat template, hyperparameters) and the state dict's tensors,
through the ``gguf`` library (no conversion subprocess). The tensor names and the one layout change follow
llama.cpp's ``convert_hf_to_gguf.py`` (``LlamaModel``): ``q_proj`` and ``k_proj`` rows are permuted from the
Hugging Face rotary layout (two halves) to llama.cpp's (interleaved pairs). Matrices are written in ``dtype``
(``f32``, ``f16``, ``bf16``, or ``q8_0``: llama.cpp's 8-bit blocks of 32 weights with one scale, rounded by the
``gguf`` library's reference quantiser); vectors (norms) stay float32, as the converter keeps them.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

__all__ = ["FILE_TYPES", "hf_name", "permute_rotary", "write_gguf"]

FILE_TYPES = {"f32": "ALL_F32", "f16": "MOSTLY_F16", "bf16": "MOSTLY_BF16", "q8_0": "MOSTLY_Q8_0"}  # → LlamaFileType
_BLOCK = {  # llama.cpp block tensor → Hugging Face Llama module (convert_hf_to_gguf.py / gguf TensorNameMap)
    "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}
_TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


def hf_name(gguf_name: str) -> str:
    """The Hugging Face state-dict key of GGUF tensor ``gguf_name`` (``blk.3.attn_q.weight`` →
    ``model.layers.3.self_attn.q_proj.weight``).

    Raises:
        KeyError: a tensor this Llama mapping does not know.
    """
    m = re.fullmatch(r"blk\.(\d+)\.(\w+)\.(weight|bias)", gguf_name)
    if m:
        return f"model.layers.{m.group(1)}.{_BLOCK[m.group(2)]}.{m.group(3)}"
    stem, _, kind = gguf_name.rpartition(".")
    return f"{_TOP[stem]}.{kind}"


def permute_rotary(weight, heads: int):
    """``weight`` (numpy, ``[heads * head_dim, in]``) with each head's rows reordered from the Hugging Face rotary
    layout to llama.cpp's (``convert_hf_to_gguf.py``, ``LlamaModel.permute``)."""
    rows = weight.shape[0]
    return weight.reshape(heads, 2, rows // heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def write_gguf(state_dict: Mapping[str, Any], template: str | os.PathLike, path: str | os.PathLike,
               dtype: str = "f32") -> Path:
    """Write ``state_dict`` (Hugging Face Llama keys → torch tensors or numpy arrays) as a GGUF at ``path`` with
    ``template``'s metadata and tensor list, matrices in ``dtype`` (see the module docstring). The file is written
    next to ``path`` and renamed onto it, so a reader never sees half a file. A tied ``lm_head`` is taken from
    the embedding when the state dict has none. Returns ``path``.

    Raises:
        ValueError: an unknown ``dtype``, or a tensor whose shape differs from the template's.
        KeyError: a template tensor with no state-dict entry.
    """
    import gguf
    import numpy as np

    if dtype not in FILE_TYPES:
        raise ValueError(f"dtype {dtype!r}: choose one of {sorted(FILE_TYPES)}")
    reader = gguf.GGUFReader(str(template))
    arch = reader.fields["general.architecture"].contents()
    heads = int(reader.fields[f"{arch}.attention.head_count"].contents())
    kv_heads = int(reader.fields[f"{arch}.attention.head_count_kv"].contents())
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    writer = gguf.GGUFWriter(str(tmp), arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.file_type"):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), vtype, sub_type=sub)
    writer.add_file_type(getattr(gguf.LlamaFileType, FILE_TYPES[dtype]))
    for tensor in reader.tensors:
        key = hf_name(tensor.name)
        value = state_dict.get(key)
        if value is None and key == "lm_head.weight":
            value = state_dict["model.embed_tokens.weight"]
        if value is None:
            raise KeyError(f"{tensor.name}: the state dict has no {key}")
        data = value.detach().float().cpu().numpy() if hasattr(value, "detach") else np.asarray(value, np.float32)
        expected = tuple(int(d) for d in reversed(tensor.shape))
        if data.shape != expected:
            raise ValueError(f"{key}: shape {data.shape}, the template's {tensor.name} is {expected}")
        if tensor.name.endswith("attn_q.weight"):
            data = permute_rotary(data, heads)
        elif tensor.name.endswith("attn_k.weight"):
            data = permute_rotary(data, kv_heads)
        if data.ndim == 1 or dtype == "f32":
            writer.add_tensor(tensor.name, np.ascontiguousarray(data, np.float32))
        elif dtype == "f16":
            writer.add_tensor(tensor.name, np.ascontiguousarray(data, np.float16))
        else:
            qtype = gguf.GGMLQuantizationType.BF16 if dtype == "bf16" else gguf.GGMLQuantizationType.Q8_0
            writer.add_tensor(tensor.name, gguf.quants.quantize(np.ascontiguousarray(data, np.float32), qtype),
                              raw_dtype=qtype)  # the shape is read from the packed bytes, as the converter does
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(path)
    return path
