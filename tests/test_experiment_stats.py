"""The experiment statistics with the seed as the unit: a placebo comparison (two arms that differ only in name)
rejects at the nominal rate, while a test over (seed, evaluation) cells does not; Holm's correction; the cells'
intraclass correlation."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ttest_1samp

from genenv.trainer.experiments import outcome
from genenv.trainer.experiments.provenance import check_first_iteration, check_hosts, host
from genenv.trainer.experiments.stats import correct, holm, intraclass_correlation, seed_test, shows_gain


def placebo_runs(rng: np.random.Generator, seeds: int, evaluations: int = 5) -> dict[int, list[dict]]:
    """One arm's runs drawn from the process every arm shares: each seed's training trajectory sets its level
    (sd 15 points, the spread of the shipped TWX runs), each evaluation adds its own noise (sd 5 points)."""
    runs = {}
    for seed in range(seeds):
        level = 0.4 + rng.normal(0, 0.15)
        runs[seed] = [{"iteration": 2 * (k + 1), "heldout/score": float(level + rng.normal(0, 0.05))}
                      for k in range(evaluations)]
    return runs


def test_a_placebo_comparison_rejects_at_the_nominal_rate_and_the_cell_test_would_not():
    rng = np.random.default_rng(0)
    mean_score = lambda rows: float(np.mean([r["heldout/score"] for r in rows]))  # noqa: E731 - the AUC's role
    seed_level, cell_level, sims = 0, 0, 600
    for _ in range(sims):
        stat = outcome.compare(placebo_runs(rng, 8), placebo_runs(rng, 8), auc=mean_score)
        assert stat["auc"]["n_seeds"] == 8 and stat["n_cells"] == 40
        seed_level += stat["auc"]["p_value"] < 0.05
        cell_level += ttest_1samp([c[2] for c in stat["cells"]], 0.0).pvalue < 0.05
    # 600 placebo experiments: the seed-level sign-flip test rejects at most at 5 % (binomial sd 0.9 points);
    # treating the 40 correlated cells as independent rejects far more often
    assert 0.02 <= seed_level / sims <= 0.075
    assert cell_level / sims > 0.3


def test_a_real_difference_of_every_seed_is_found_and_its_interval_is_over_seeds():
    rng = np.random.default_rng(1)
    control = placebo_runs(rng, 6)
    treated = {s: [{**r, "heldout/score": r["heldout/score"] + 0.2 + rng.normal(0, 0.01)} for r in rows]
               for s, rows in control.items()}
    stat = outcome.compare(treated, control, auc=lambda rows: float(np.mean([r["heldout/score"] for r in rows])))
    assert stat["auc"]["difference"]["mean"] == pytest.approx(0.2, abs=0.01)
    assert 0.17 < stat["auc"]["difference"]["low"] < stat["auc"]["difference"]["high"] < 0.23
    assert stat["auc"]["p_value"] == pytest.approx(2 / 2 ** 6)  # every seed the same sign: the exact test's floor
    assert stat["final"]["per_seed"] == pytest.approx({s: 0.2 for s in range(6)}, abs=0.04)


def test_holm_adjusts_in_order_and_keeps_missing_tests_out_of_the_family():
    adjusted = holm([0.01, 0.04, 0.03, None])  # 3 tests: 3 x 0.01, then max(0.03, 2 x 0.03), then max(0.06, 0.04)
    assert adjusted[:3] == pytest.approx([0.03, 0.06, 0.06]) and adjusted[3] is None
    assert holm([0.5, 0.9]) == [1.0, 1.0]
    tests = [seed_test({0: 0.1, 1: 0.2, 2: 0.3}), seed_test({0: -0.1, 1: 0.2, 2: 0.0})]
    correct(tests)
    assert all(t["family"] == 2 for t in tests) and tests[0]["p_holm"] == pytest.approx(min(1, 2 * tests[0]["p_value"]))


def test_a_gain_is_shown_only_at_a_positive_mean_and_holm_p_below_the_level():
    """`shows_gain`: 6 seeds all +0.2 give the exact sign-flip p 2/64 (shown alone, not after Holm over 2 with the
    same p twice); the same values negated are not a gain; one seed has no p; an uncorrected test is refused."""
    gain, loss = seed_test({s: 0.2 for s in range(6)}), seed_test({s: -0.2 for s in range(6)})
    correct([gain])
    correct([loss])
    assert gain["p_holm"] == pytest.approx(2 / 64) and shows_gain(gain) and not shows_gain(loss)
    pair = [seed_test({s: 0.2 for s in range(6)}), seed_test({s: 0.2 for s in range(6)})]
    correct(pair)
    assert pair[0]["p_holm"] == pytest.approx(4 / 64) and not shows_gain(pair[0])
    one = seed_test({0: 0.5})
    correct([one])
    assert not shows_gain(one)
    with pytest.raises(KeyError):
        shows_gain(seed_test({s: 0.2 for s in range(6)}))


def test_intraclass_correlation_splits_the_variance_between_and_within_seeds():
    between = [np.full(5, v) + np.array([0, 0.01, -0.01, 0, 0]) for v in (0.1, 0.5, 0.9)]
    assert intraclass_correlation(between) > 0.99
    rng = np.random.default_rng(2)
    assert abs(intraclass_correlation([rng.normal(0, 1, 50) for _ in range(20)])) < 0.1
    assert intraclass_correlation([np.array([1.0, 2.0])]) is None


def test_the_first_iteration_check_names_the_seeds_and_the_arms_that_split():
    """Arms that wrote alike at iteration 0 are "the same"; where one departs, the note names the groups of arms and
    the seed; an arm that wrote nothing there (``static``) is left out, and one writing arm alone is not checked;
    rollouts that differ in tokens split as texts do."""
    same = ('{"game": "coin", "seed": 10}', '{"game": "coin", "seed": 3}')
    writes = {"genenv": {0: same, 1: same, 2: (same[0], '{"game": "coin", "seed": 4}')},
              "random_env": {0: same, 1: same, 2: same}, "static": {0: (), 1: (), 2: ()}}
    assert check_first_iteration(writes) == ("iteration 0's environment-policy texts: the same at seeds 0, 1; "
                                             "split genenv | random_env at seed 2")
    assert check_first_iteration({"genenv": {0: same}, "static": {0: ()}}).endswith("not checked (fewer than two "
                                                                                  "arms at one seed)")
    rollouts = {"genenv": {3: (4356, 0.25)}, "random_env": {3: (4382, 0.25)}, "genenv_n8": {3: (7012, 0.2)}}
    assert check_first_iteration(rollouts, "agent rollouts") == ("iteration 0's agent rollouts: split genenv | "
                                                                 "random_env | genenv_n8 at seed 3")


def test_the_host_record_tells_apart_cpus_of_one_model_name_whose_bfloat16_kernels_differ(monkeypatch):
    """Two CPUs with the same model name, one with AVX-512 bf16 and one with AVX2 only (both seen as "AMD EPYC"),
    sample in different dtypes, so their recorded hosts differ; an AMX host is named as such."""
    import torch

    from genenv.runtime.models import native_bfloat16

    def record(capability: str, amx: bool, avx512_bf16: bool) -> str:
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
        host.cache_clear()
        assert native_bfloat16() == (amx or avx512_bf16)  # sampling's dtype choice reads the same path
        return host()

    try:
        avx2, avx512 = record("AVX2", False, False), record("AVX512", False, True)
        amx = record("AVX512", True, True)
    finally:
        host.cache_clear()
    assert avx2 != avx512 and "; AVX2; torch " in avx2 and "; AVX512, avx512_bf16; torch " in avx512
    assert "; AVX512, amx; torch " in amx
    assert avx2.split(";")[0] == avx512.split(";")[0] == amx.split(";")[0]  # the same model name in all three


def test_the_host_note_lists_each_seeds_host_and_names_a_seed_whose_arms_ran_on_two():
    """Seeds whose arms all recorded one host are listed under it; a seed whose arms recorded different hosts (an AMX
    host samples in bfloat16, an AVX2 one in float32, so they are not paired) is named with each arm's hosts."""
    intel, amd = "Intel(R) Xeon(R) Processor; torch 2.13.0+cpu", "AMD EPYC; torch 2.13.0+cpu"
    hosts = {s: {"genenv": {intel}, "random_env": {intel}} for s in (0, 1)}
    hosts[7] = {"genenv": {amd}, "random_env": {amd}}
    assert check_hosts(hosts) == f"host: {intel} at seeds 0, 1; {amd} at seed 7"
    hosts[6] = {"genenv": {intel}, "random_env": {amd, intel}}
    assert check_hosts(hosts) == (f"host: {intel} at seeds 0, 1; {amd} at seed 7; **arms on different hosts** at "
                                  f"seed 6 (genenv: {intel}; random_env: {amd}, {intel})")
    assert check_hosts({3: {"genenv": {"unknown"}}}) == "host: unknown at seed 3"
