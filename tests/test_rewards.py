"""Reward math against hand-computed values: free-text similarity (Eq. 1), Eq. 3, the filter, GRPO advantages."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from genenv.rewards.env_policy_reward import (absolute_zero_reward, alpha_curriculum_reward, difficulty_filter,
                                              env_policy_reward, learnability_reward, rzero_reward)
from genenv.rewards.text import exact_match, fuzz_ratio, normalize_answer, similarity, token_f1


def test_squad_normalisation_em_and_f1_hand_values():
    assert normalize_answer("The  Titan IIIE!") == "titan iiie"
    assert exact_match("the George VI", "George VI\n") == 1.0
    assert exact_match("George V", "George VI") == 0.0
    # pred tokens {james, madison, president}, gold {james, madison}: P = 2/3, R = 1 -> F1 = 0.8
    assert token_f1("President James Madison", "james madison") == pytest.approx(0.8)
    assert token_f1("", "x") == 0.0
    assert fuzz_ratio("Madison, James", "james madison") == pytest.approx(1.0)
    with pytest.raises(ValueError, match="unknown free-text metric"):
        similarity("a", "b", "bleu")


def test_embedding_similarity_with_packaged_minilm():
    close = similarity("The capital of France is Paris", "Paris is France's capital", "embedding")
    far = similarity("The capital of France is Paris", "Quantum chromodynamics of gluons", "embedding")
    assert 0.6 < close <= 1.0 and 0.0 <= far < 0.3


def test_alpha_curriculum_reward_eq3_hand_values():
    assert alpha_curriculum_reward(0.5) == pytest.approx(1.0)
    assert alpha_curriculum_reward(0.25, alpha=0.5, beta=2.0) == pytest.approx(math.exp(-2 * 0.0625))  # 0.8825
    assert alpha_curriculum_reward(1.0, alpha=0.5, beta=2.0) == pytest.approx(math.exp(-0.5))
    assert alpha_curriculum_reward(0.0, alpha=0.3, beta=10.0) == pytest.approx(math.exp(-0.9))
    np.testing.assert_allclose(alpha_curriculum_reward(np.array([0.5, 0.75])), [1.0, math.exp(-2 * 0.0625)])


def test_difficulty_filter_band_and_boundaries():
    assert difficulty_filter(0.5) and difficulty_filter(0.4) and difficulty_filter(0.6)
    assert not difficulty_filter(0.375) and not difficulty_filter(0.625) and not difficulty_filter(1.0)
    np.testing.assert_array_equal(difficulty_filter(np.array([0.0, 0.45, 0.7]), alpha=0.5, k_min=0.1),
                                  [False, True, False])


def test_other_environment_rewards_share_the_signature():
    assert rzero_reward(0.5) == 1.0 and rzero_reward(0.25) == 0.5 and rzero_reward(1.0) == 0.0
    assert absolute_zero_reward(0.25) == 0.75 and absolute_zero_reward(0.0) == 0.0 and absolute_zero_reward(1.0) == 0.0
    assert learnability_reward(0.5) == 1.0 and learnability_reward(0.25) == 0.75
    assert learnability_reward(0.0) == 0.0 and learnability_reward(1.0) == 0.0
    assert env_policy_reward("learnability", 0.75, alpha=0.25) == pytest.approx(0.75)  # ignores α
    assert env_policy_reward("alpha_curriculum", 0.25, alpha=0.5, beta=2.0, lam=1.0) == pytest.approx(math.exp(-0.125))
    with pytest.raises(ValueError, match="unknown environment-policy reward"):
        env_policy_reward("nope", 0.5)


def test_grpo_advantages_on_known_groups_come_from_verl():
    from genenv.trainer.updates.advantages import grpo_scores, informative_groups

    scores = grpo_scores([1, 0, 1, 0, 1, 1], ["a", "a", "a", "a", "b", "b"])
    # group a: mean 0.5, unbiased std sqrt(1/3) = 0.57735 -> +-0.8660; group b: all equal -> 0
    expected = 0.5 / math.sqrt(1 / 3)
    assert scores[:4] == pytest.approx([expected, -expected, expected, -expected], rel=1e-4)
    assert scores[4:] == [0.0, 0.0]
    keep, kept, dropped = informative_groups([1, 0, 1, 0, 1, 1], ["a", "a", "a", "a", "b", "b"])
    assert keep == [0, 1, 2, 3] and kept == 1 and dropped == 1
    assert informative_groups([0.3], ["solo"]) == ([], 0, 1)


def test_grpo_counts_an_episode_once_and_masks_environment_tokens():
    from genenv.trainer.updates import Sample, prepare_update

    # task t: episode e0 (reward 1) trained as two per-turn sequences, episode e1 (reward 0) as one
    samples = [Sample([1, 2], [5, 6, 2], 1.0, "t", episode="e0"), Sample([1, 2, 7], [8, 2], 1.0, "t", episode="e0"),
               Sample([1, 2], [9, 9, 2], 0.0, "t", episode="e1", response_mask=[1, 0, 1])]
    batch, metrics = prepare_update(samples, 0, "grpo")
    adv = batch.batch["advantages"]
    # two episodes (not three samples) form the group: +-0.7071 (unbiased std of [1, 0])
    expected = 0.5 / math.sqrt(0.5)
    assert adv[0, :3].tolist() == pytest.approx([expected] * 3, rel=1e-4)
    assert adv[1, :2].tolist() == pytest.approx([expected] * 2, rel=1e-4) and adv[1, 2].item() == 0.0  # padding
    assert adv[2, 0].item() == pytest.approx(-expected, rel=1e-4) and adv[2, 1].item() == 0.0  # env token
    assert metrics["groups_kept"] == 1 and metrics["groups_dropped"] == 0


def test_a_short_hedge_beside_a_long_gold_keeps_most_but_not_all_credit():
    """Extra words cost credit under every lexical metric, by the lengths: token F1 of a g-token gold plus k extra
    tokens is 2g / (2g + k) (here g = 8 after SQuAD normalisation drops the articles, k = 1)."""
    gold = "The Formation of Vegetable Mould Through the Action of Worms"
    hedged = "1823, The Formation of Vegetable Mould Through the Action of Worms"
    assert similarity(hedged, gold, "f1") == pytest.approx(16 / 17)
    for metric in ("f1", "fuzz", "rouge_l"):
        assert 0.9 < similarity(hedged, gold, metric) < 1.0
    assert similarity(hedged, gold, "exact_match") == 0.0
