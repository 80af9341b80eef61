"""The static-cache decoding path (``TransformersPolicy(static_cache=True)``, ``<role>.policy.static_cache``):
``generate`` into a static KV cache, compiled on a GPU (``tests/test_gpu.py``); on the CPU it runs uncompiled and
must decode exactly what the default path decodes (greedy, float32)."""
from __future__ import annotations

from genenv.runtime.policies import STATIC_WIDTH_STEP, Prompt, TransformersPolicy, left_padded


def test_left_padding_rounds_the_width_up_to_the_step():
    ids, mask = left_padded([[5, 6, 7], [8]], pad_token_id=0, multiple=4)
    assert ids.tolist() == [[0, 5, 6, 7], [0, 0, 0, 8]] and mask.tolist() == [[0, 1, 1, 1], [0, 0, 0, 1]]
    ids, _ = left_padded([[1] * 65], pad_token_id=0, multiple=STATIC_WIDTH_STEP)
    assert ids.shape == (1, 2 * STATIC_WIDTH_STEP)
    assert left_padded([[1, 2], [3]], pad_token_id=0)[0].tolist() == [[1, 2], [0, 3]]


def test_static_cache_decodes_what_the_default_path_decodes(tiny_model_dir):
    """Greedy in float32, prompts of unequal lengths, one and two samples per prompt: the same response ids as the
    default path (rows retiring, KV reuse), while the static policy keeps no KV states and has no continuous batch."""
    static = TransformersPolicy(str(tiny_model_dir), dtype="float32", static_cache=True)
    default = TransformersPolicy(str(tiny_model_dir), dtype="float32")
    assert static.prefix_cache is None and not static.retire_rows and static.continuous() is None
    prompts = [Prompt([{"role": "user", "content": "List three fruits and say why you like each of them."}]),
               Prompt([{"role": "user", "content": "Count to four."}]),
               Prompt([{"role": "user", "content": "Name a colour."}], max_new_tokens=3)]
    for n in (1, 2):
        got = static.generate(prompts, n=n, max_new_tokens=12)
        want = default.generate(prompts, n=n, max_new_tokens=12)
        assert [[g.response_ids for g in gens] for gens in got] == [[g.response_ids for g in gens] for gens in want]
        assert [len(gens) for gens in got] == [n] * 3 and len(got[2][0].response_ids) <= 3
    assert static.generated_tokens == default.generated_tokens > 0


def test_switching_the_static_cache_off_brings_back_the_kv_reuse_the_policy_was_built_with(tiny_model_dir):
    from genenv.runtime.policies import TransformersPolicy

    built = TransformersPolicy(str(tiny_model_dir), dtype="float32", static_cache=True, continuous_batching=False)
    assert built.static_cache and built.prefix_cache is None and not built.retire_rows
    built.use_static_cache(False)
    assert built.prefix_cache is not None and built.retire_rows and not built.continuous_batching  # as built
    policy = TransformersPolicy(str(tiny_model_dir), dtype="float32", prefix_cache_tokens=4096)
    store = policy.prefix_cache
    policy.generate_from_ids([[1, 2, 3, 4, 5, 6]], temperature=0.0, max_new_tokens=3)
    kept = store.prompt_tokens
    policy.use_static_cache(True)
    assert (policy.static_cache, policy.prefix_cache, policy.retire_rows, policy.continuous_batching) == \
        (True, None, False, False)
    policy.use_static_cache(False)
    assert policy.prefix_cache is store and store.prompt_tokens == kept > 0  # the same store, what it held kept
    assert policy.retire_rows and policy.continuous_batching and not policy.static_cache
