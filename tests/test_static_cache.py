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
