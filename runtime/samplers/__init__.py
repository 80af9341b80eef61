"""The samplers the trainer samples through (`sampler`: the interface, its kinds and `make_sampler`), and the
real engines behind it beyond transformers: llama.cpp's ``llama-server`` (`llama_server`), fed the policy's
in-memory weights as GGUF (`gguf_weights`). Importing this package starts nothing."""

__all__ = ["gguf_weights", "llama_server", "sampler"]
