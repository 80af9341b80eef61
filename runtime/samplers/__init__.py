"""The samplers the trainer samples through (`sampler`: the interface, its kinds and `make_sampler`), and the
real engines behind it beyond transformers: llama.cpp's ``llama-server`` (`llama_server`), fed the policy's
in-memory weights as GGUF (`gguf_weights`), and vLLM's server (`vllm_server`), both on what server samplers
share (`server`). Importing this package starts nothing."""

__all__ = ["gguf_weights", "llama_server", "sampler", "server", "vllm_server"]
