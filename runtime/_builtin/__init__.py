"""The project's own CPU inference engine, private to the ``builtin`` sampler (`genenv.runtime.samplers.sampler`,
reached only through `genenv.runtime.policies.TransformersPolicy`):
one continuous batch across episodes and turns (`continuous`), KV states kept between turns (`prefix_cache`), an
in-place KV cache (`kv_cache`), decoding that retires finished rows (`decoding`) and a CPU attention for single-token
decoding steps (`attention`). It stays because it is measured faster than the real engines on CPUs with native bf16
(``lab/notes/engine-measurements.md``); an import contract keeps every other module off it."""

__all__ = ["attention", "continuous", "decoding", "kv_cache", "prefix_cache"]
