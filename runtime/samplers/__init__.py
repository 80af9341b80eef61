"""Samplers backed by inference engines the field runs: llama.cpp's ``llama-server`` (`llama_server`), fed the
policy's in-memory weights as GGUF (`gguf_weights`). Importing this package starts nothing."""

__all__ = ["gguf_weights", "llama_server"]
