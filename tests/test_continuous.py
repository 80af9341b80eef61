"""Continuous batching across episodes and turns (``runtime/_builtin/continuous.py``): on real TextWorldExpress games and
Bamboogle questions the continuous loop plays the lock-step loop's greedy episodes token for token (budgets,
refilled rows and shared first prompts included), a prompt that rewrites a row's history continues from the
shared prefix only, sampled groups differ and reproduce under a seed, and bad calls raise clear errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from genenv.benchmarks.registry import get_benchmark
from genenv.runtime._builtin.continuous import ContinuousBatch
from genenv.runtime._builtin.prefix_cache import common_prefix
from genenv.runtime.episodes import RolloutSpec, per_task, play_episodes
from genenv.runtime.policies import Prompt, TransformersPolicy

from conftest import DATA_DIR


def _next_turn(batch) -> list:
    """Step ``batch`` until a turn ends; returns the ended turns."""
    ended = []
    while not ended:
        ended = batch.step()
    return ended


def _streams(trajs):
    return [[(t.prompt_ids, t.response_ids, t.text, t.reward) for t in traj.turns] for traj in trajs]


@pytest.fixture(scope="module")
def policies(tiny_model_dir):
    return {cont: TransformersPolicy(str(tiny_model_dir), dtype="float32", continuous_batching=cont)
            for cont in (True, False)}


@pytest.mark.parametrize("bench, n, chunk, budget", [("twx", 2, 64, None), ("twx", 2, 3, 40),
                                                     ("bamboogle", 3, 64, None)])
def test_greedy_episodes_equal_the_lock_step_loop(policies, bench, n, chunk, budget):
    """Greedy float32: every turn's prompt ids, response ids, text and reward are the lock-step loop's, with a
    response budget that truncates episodes and with fewer rows than episodes (rows refilled)."""
    tasks = get_benchmark(bench, DATA_DIR).load(split="train")[:3]
    spec = RolloutSpec(n=n, temperature=0.0, max_new_tokens=8, max_response_tokens=budget)
    out = {cont: play_episodes(tasks, policy, spec, chunk_size=chunk) for cont, policy in policies.items()}
    assert _streams(out[True].trajectories) == _streams(out[False].trajectories)
    trajs = out[True].trajectories
    assert [t.info.get("error") for t in trajs] == [t.info.get("error") for t in out[False].trajectories]
    if bench == "twx":
        assert max(len(t.turns) for t in trajs) >= (2 if budget else 3)
    if budget:
        assert any(t.info.get("truncated_by_budget") for t in trajs)
    counts = policies[True].continuous_counters
    assert counts["reused_tokens"] > 0 and counts["prefill_tokens"] < counts["prompt_tokens"]


def test_groups_of_different_sizes_decode_in_one_batch(policies):
    """``RolloutSpec.group_sizes``: greedy float32 episodes of three TWX games with 2, 1 and 3 episodes, played in
    one batch, are each game's own rollout of that size, token for token, in task order with per-task episode
    indices, in both loops; a size list that does not fit the tasks raises before any env opens; numpy integers
    count as sizes."""
    tasks = get_benchmark("twx", DATA_DIR).load(split="train")[:3]
    spec = RolloutSpec(group_sizes=(2, 1, 3), temperature=0.0, max_new_tokens=8)
    for policy in policies.values():
        together = play_episodes(tasks, policy, spec).trajectories
        assert [(t.task.id, t.sample_index) for t in together] == [
            (tasks[0].id, 0), (tasks[0].id, 1), (tasks[1].id, 0), (tasks[2].id, 0), (tasks[2].id, 1), (tasks[2].id, 2)]
        apart = [traj for task, size in zip(tasks, (2, 1, 3))
                 for traj in play_episodes([task], policy, RolloutSpec(n=size, temperature=0.0,
                                                                       max_new_tokens=8)).trajectories]
        assert _streams(together) == _streams(apart)
        assert max(len(t.turns) for t in together) >= 2
    with pytest.raises(ValueError, match="3 group sizes for 2 tasks"):
        play_episodes(tasks[:2], policies[True], spec)
    with pytest.raises(ValueError, match="at least one episode"):
        RolloutSpec(group_sizes=(2, 0)).sizes(2)
    assert per_task(np.int64(2), 3) == [2, 2, 2] and per_task(np.array([1, 3]), 2) == [1, 3]  # numpy counts too


def test_a_rewritten_history_continues_from_the_shared_prefix_only(policies):
    """A row's next prompt that departs from its cached tokens early: only the shared prefix is kept and the
    greedy response equals a fresh ``generate`` of that prompt."""
    policy = policies[True]
    tok = policy.tokenizer
    first = policy.encode_prompt([{"role": "user", "content": "Go north and take the coin."}])
    other = policy.encode_prompt([{"role": "user", "content": "Look around, then open the door to the kitchen."}])
    batch = policy.continuous(temperature=0.0, max_new_tokens=6, capacity=2)
    batch.add("a", first)
    ended = _next_turn(batch)
    assert ended[0].key == "a" and ended[0].prompt_ids == first
    before = dict(batch.counters)
    batch.add("a", other)
    ended = _next_turn(batch)
    shared = common_prefix(first, other)
    assert 0 < shared < len(first)
    assert batch.counters["reused_tokens"] - before["reused_tokens"] == shared
    assert batch.counters["prefill_tokens"] - before["prefill_tokens"] == len(other) - shared
    fresh = policies[False].generate_from_ids([other], temperature=0.0, max_new_tokens=6)[0][0]
    assert ended[0].response_ids == fresh.response_ids
    assert tok.decode(ended[0].response_ids, skip_special_tokens=True) == fresh.text


def test_sampled_groups_differ_and_reproduce_under_a_seed(policies):
    """Temperature 1, 4 episodes of one TWX game: the group's first responses are not all equal (sampled), the
    shared first prompt is prefilled once, and the same seed replays the same episodes."""
    tasks = get_benchmark("twx", DATA_DIR).load(split="train")[:1]
    runs = []
    for _ in range(2):
        policy = policies[True]
        before = dict(policy.continuous_counters)
        torch.manual_seed(3)
        trajs = play_episodes(tasks, policy, RolloutSpec(n=4, temperature=1.0, max_new_tokens=8)).trajectories
        runs.append(_streams(trajs))
        first = trajs[0].turns[0].prompt_ids
        fed = policy.continuous_counters["prefill_tokens"] - before["prefill_tokens"]
        later = 0  # each later turn feeds what its prompt adds to the row's cached prompt and response
        for traj in trajs:
            for prev, turn in zip(traj.turns, traj.turns[1:]):
                cached = prev.prompt_ids + prev.response_ids[:-1]  # the last sampled token is never fed
                later += len(turn.prompt_ids) - min(common_prefix(cached, turn.prompt_ids), len(turn.prompt_ids) - 1)
        assert fed == len(first) + later  # the shared first prompt once, not 4 times
        assert [t.turns[0].usage["prompt_tokens"] for t in trajs] == [len(first), 0, 0, 0]
    assert runs[0] == runs[1]
    assert len({tuple(s[0][1]) for s in runs[0]}) > 1


def test_bad_calls_raise_clear_errors(policies):
    """An empty prompt, a key still in its turn and a full batch are refused with the reason."""
    batch = policies[True].continuous(temperature=0.0, max_new_tokens=4, capacity=1)
    with pytest.raises(ValueError, match="empty prompt"):
        batch.add("a", [])
    batch.add("a", [1, 2, 3])
    with pytest.raises(ValueError, match="still in its turn"):
        batch.add("a", [1, 2, 3, 4])
    with pytest.raises(ValueError, match="no free row"):
        batch.add("b", [5, 6])
    batch.release("a")
    batch.add("b", [5, 6])
    assert batch.free() == 0 and batch.busy()


def test_lock_step_policies_and_switched_off_batches_use_the_lock_step_loop(policies):
    """A policy with continuous batching off returns no batch (the loop plays in lock step)."""
    assert policies[False].continuous() is None
    assert isinstance(policies[True].continuous(), ContinuousBatch)


def test_prompts_fed_in_chunks_give_the_tokens_of_one_prefill(policies):
    """With at most 5 prompt tokens a step, three prompts of different lengths are fed over many steps while the
    first to finish already decodes; the greedy responses equal a fresh ``generate`` of each prompt."""
    policy = policies[True]
    prompts = [policy.encode_prompt([{"role": "user", "content": text}]) for text in
               ("Take the coin.", "You are in the kitchen. There is a fridge and a door to the north.", "Hi")]
    batch = policy.continuous(temperature=0.0, max_new_tokens=5, capacity=3)
    batch.step_tokens = 5
    for k, ids in enumerate(prompts):
        batch.add(k, ids)
    got = {}
    while batch.busy():
        for out in batch.step():
            got[out.key] = out.response_ids
    assert batch.counters["prefill_passes"] >= sum(len(p) for p in prompts) // 5
    fresh = policies[False].generate_from_ids(prompts, temperature=0.0, max_new_tokens=5)
    assert [got[k] for k in range(3)] == [g[0].response_ids for g in fresh]


def test_the_kv_budget_holds_back_new_rows(policies):
    """No new row starts while one more row at the longest row's length would pass ``max_kv_tokens``; a
    released row makes room."""
    policy = policies[True]
    ids = policy.encode_prompt([{"role": "user", "content": "Go east."}])
    batch = policy.continuous(temperature=0.0, max_new_tokens=3, capacity=4)
    batch.max_kv_tokens = len(ids) + len(ids) // 2
    batch.add("a", ids)
    batch.step()
    assert batch.free() == 0
    while batch.busy():
        batch.step()
    batch.release("a")
    assert batch.free() == 4


def test_the_buffers_hold_the_longest_rows_fill_plus_a_step_and_shrink_when_it_ends(policies):
    """The KV buffers' columns follow `buffer_columns` of the longest row: they grow in steps of
    ``COLUMN_STEP`` while it decodes, are cut once it is released, and the short row's greedy response is the one a
    fresh ``generate`` gives, before and after the cut."""
    from genenv.runtime._builtin.continuous import COLUMN_STEP, buffer_columns

    policy = policies[True]
    short = policy.encode_prompt([{"role": "user", "content": "Hi"}])
    long = policy.encode_prompt([{"role": "user", "content": " ".join(["north east south west"] * 60)}])
    assert len(long) > len(short) + 3 * COLUMN_STEP
    batch = policy.continuous(temperature=0.0, max_new_tokens=4, capacity=8)
    batch.add("long", long)
    batch.add("short", short)
    for k in range(5):  # idle rows keep the batch from dropping the long row's slot when it is released
        batch.add(k, short)
    got = {}
    while batch.busy():
        for out in batch.step():
            got[out.key] = out.response_ids
            assert batch.cache.keys[0].shape[2] == buffer_columns(len(long))  # one growth covered the prompt
    width = int(batch.cache.fill.max())
    assert buffer_columns(width) == batch.cache.keys[0].shape[2] and width < batch.cache.keys[0].shape[2]
    batch.release("long")
    assert batch.free() == 2  # its filled columns no longer hold new rows back
    batch.add("short", list(short) + got["short"] + short)
    while batch.busy():
        for out in batch.step():
            got["again"] = out.response_ids
    width, columns = int(batch.cache.fill.max()), batch.cache.keys[0].shape[2]  # cut at the step the turn began
    assert width < columns <= buffer_columns(width) < buffer_columns(len(long))
    fresh = policies[False].generate_from_ids([short, list(short) + got["short"] + short], temperature=0.0,
                                              max_new_tokens=4)
    assert [got["short"], got["again"]] == [g[0].response_ids for g in fresh]


@pytest.mark.parametrize("dtype", [None, "bfloat16"])
def test_the_update_reports_how_far_the_samplers_log_probs_lie_from_the_trainers(tiny_model_dir, dtype):
    """Real TWX episodes through the local engine's continuous batch, then one agent update: every trained token
    carries the sampler's log-prob, and the update reports the gap to the trainer's (veRL's debug metrics). In
    float32 the sampler is the trained model itself, so the gap is rounding only; a bfloat16 sampling copy
    differs by its rounding, and the gap says so."""
    from genenv.trainer.engines.local import LocalBackend, RoleConfig
    from genenv.trainer.updates.sample import agent_samples

    roles = {role: RoleConfig.defaults(role, model=str(tiny_model_dir), lr=1e-4) for role in ("agent", "env_policy")}
    backend = LocalBackend(roles, autocast_dtype=dtype, threads=1)
    tasks = get_benchmark("twx", DATA_DIR).load(split="train")[:2]
    torch.manual_seed(0)
    rollout = backend.rollout(tasks, RolloutSpec(n=2, temperature=1.0, max_new_tokens=6))
    samples = agent_samples(rollout.trajectories)
    assert samples and all(len(s.rollout_logprobs) == len(s.response_ids) for s in samples)
    assert all(lp <= 0.0 for s in samples for lp, m in zip(s.rollout_logprobs, s.response_mask) if m)
    metrics = backend.update("agent", samples, "rwr")
    assert metrics["rollout_probs_diff_valid"] == 1
    gap = metrics["rollout_log_probs_diff_mean"]
    if dtype is None:
        assert gap < 1e-4 and abs(metrics["rollout_ratio_mean"] - 1.0) < 1e-4
        assert metrics["rollout_actor_probs_pearson_corr"] > 0.9999
    else:
        assert 1e-4 < gap < 0.5 and metrics["rollout_probs_diff_max"] < 0.5


def test_inverse_cdf_draws_follow_the_softmax_and_never_a_zero_probability_token():
    """20,000 draws from a 6-token distribution with two tokens at probability 0 (logit -inf) and a temperature:
    each token's frequency lies within 4 standard errors of its softmax probability, as ``multinomial``'s."""
    from genenv.runtime._builtin.decoding import sample_tokens

    logits = torch.tensor([[-float("inf"), 1.0, 0.0, -float("inf"), 2.0, -1.0]]).repeat(20000, 1)
    torch.manual_seed(0)
    probs = torch.softmax(logits[0] / 0.7, dim=-1)
    for inverse_cdf in (True, False):
        counts = torch.bincount(sample_tokens(logits, 0.7, inverse_cdf=inverse_cdf), minlength=6).double() / 20000
        assert counts[0] == 0 and counts[3] == 0
        assert torch.all((counts - probs).abs() <= 4 * (probs * (1 - probs) / 20000).sqrt() + 1e-12)
    assert sample_tokens(logits[:2], 0.0).tolist() == [4, 4]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_packed_prompt_segments_attend_as_grouped_query_attention(dtype):
    """Two prompt segments with grouped-query heads (9 over 3) beside a decoding row: every token's output is
    softmax(q k^T / sqrt(d)) v over its own row's columns up to its position, with query head h reading KV head
    h // 3, computed here in float64 from the definition."""
    from genenv.runtime._builtin.continuous import Packed

    torch.manual_seed(0)
    rows, kv, heads, dim, capacity = 3, 3, 9, 16, 160
    long = 69
    segments = [(0, 0, 7, 20), (1, 7, 1, 30), (2, 8, long, 11)]  # (row, start, length, fill)
    t = 8 + long
    keys, values = torch.randn(rows, kv, capacity, dim), torch.randn(rows, kv, capacity, dim)
    query = torch.randn(1, heads, t, dim)
    got = Packed(segments, rows).attend(query.to(dtype), keys.to(dtype), values.to(dtype), None).double()
    q, k, v = query.to(dtype).double(), keys.to(dtype).double(), values.to(dtype).double()
    for row, start, n, fill in segments:
        for j in range(n):
            for head in range(heads):
                scores = k[row, head // 3, :fill + j + 1] @ q[0, head, start + j] / dim ** 0.5
                want = torch.softmax(scores, dim=0) @ v[row, head // 3, :fill + j + 1]
                tol = 1e-5 if dtype == torch.float32 else 3e-2
                assert torch.allclose(got[0, start + j, head], want, atol=tol, rtol=tol), (row, j, head)


def test_bfloat16_packed_attention_over_the_whole_buffer_ignores_columns_past_each_rows_fill():
    """A packed pass in bfloat16 (which reads every column of the buffers) gives the float32 pass's attention
    (which reads only the filled columns) to bfloat16 precision, although the columns past each row's fill hold
    large stale states."""
    from genenv.runtime._builtin.continuous import Packed

    torch.manual_seed(0)
    rows, kv, heads, dim, capacity = 4, 3, 9, 16, 40
    keys, values = torch.randn(rows, kv, capacity, dim), torch.randn(rows, kv, capacity, dim)
    segments = [(0, 0, 1, 10), (2, 1, 1, 25), (3, 2, 3, 5)]  # (row, start, length, fill): two decode rows, a prompt
    for row, _, n, fill in segments:
        keys[row, :, fill + n:] = 50.0
        values[row, :, fill + n:] = 1e4
    query = torch.randn(1, heads, 5, dim)
    layout = Packed(segments, rows)
    exact = layout.attend(query, keys, values, None)
    low = layout.attend(query.bfloat16(), keys.bfloat16(), values.bfloat16(), None).float()
    assert torch.allclose(low, exact, atol=3e-2, rtol=3e-2) and exact.abs().max() < 10
