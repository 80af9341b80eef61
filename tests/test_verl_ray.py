"""The ``verl_ray`` engine against the real veRL 0.9.1, everything that runs without a GPU.

- the composed per-role configs pass veRL's own validation and convert to veRL's config dataclasses as its
  workers convert them; our settings land on veRL's keys; every veRL key stays settable; typos and configs veRL
  rejects fail;
- the two resource pools map to veRL's ``ResourcePoolManager``, and ``engine=verl_ray`` on a Ray cluster without
  GPUs fails at once with what it needs (no placement group is ever created);
- our parquet rows of every registered env load through veRL's ``RLHFDataset`` with the real SmolLM2 tokenizer;
- veRL's own ``AgentLoopWorker`` (in process) instantiates ``genenv_gym`` from its registry and plays gold
  episodes of every registered env, and a CPU model's episodes; veRL's ``AgentLoopManager`` on Ray runs them in
  worker processes that register ``genenv_gym`` through our worker class;
- our ``compute_score``, loaded by veRL's reward loader from the composed config, scores real tasks;
- the update batch the engine sends to veRL's actor workers gives, under veRL's own ``ppo_loss``, the local
  engine's loss (padding rows included, and ignored).

What needs GPUs (FSDP workers, vLLM servers, weight sync, checkpoints on workers) is not run here; see
docs/distributed.md.
"""
from __future__ import annotations

import asyncio
import copy
import os
import time

import pytest
import torch
from omegaconf.errors import ConfigKeyError

from genenv.envs import ENVS
from genenv.envs.registry import render_messages
from genenv.envs.task import Task
from genenv.envs.verl_rows import to_verl_row
from genenv.trainer.cli import compose_config
from genenv.trainer.engines.verl_ray.batches import (batch_meta, pad_for_workers, tasks_to_batch,
                                                     trajectories_from_output, update_meta, worker_tensordict)
from genenv.trainer.engines.verl_ray.config import agent_loop_worker_config, role_config, validate_role_config
from genenv.trainer.engines.verl_ray.policy import VerlPolicy
from genenv.trainer.engines.verl_ray.pools import check_cluster_gpus, resource_pool_manager, resource_pool_spec
from genenv.trainer.updates import Sample, prepare_update

from test_conformance import ScriptedClient, sample_tasks

BENCHMARKS = sorted(ENVS)


@pytest.fixture(scope="module")
def paper_cfg(tmp_path_factory):
    """engine=verl_ray with the paper's settings; the embedded model stands in for Qwen2.5-7B-Instruct."""
    return compose_config(["engine=verl_ray", "profile=paper", "benchmark=bamboogle",
                           f"run_dir={tmp_path_factory.mktemp('run')}"])


@pytest.fixture(scope="module")
def agent_rcfg(paper_cfg):
    return role_config(paper_cfg, "agent")


@pytest.fixture(scope="module")
def tokenizer(agent_rcfg):
    """The tokenizer veRL's workers load (``HFModelConfig`` of the agent's model: the real SmolLM2 folder)."""
    from verl.utils.config import omega_conf_to_dataclass

    from genenv.trainer.rollout.models import prepare_tokenizer

    tok = omega_conf_to_dataclass(agent_rcfg.actor_rollout_ref.model).tokenizer
    prepare_tokenizer(tok)
    return tok


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray of 2 CPUs and no GPU, shut down after the module."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def gold_client(tokenizer, tasks):
    """A generate client that answers each task's episode with its gold turns, keyed by the env's system prompt
    and the task's prompt (TravelPlanner's two modes share their queries)."""
    scripts = {}
    for t in tasks:
        cls = ENVS[t.benchmark].env_class
        turns = len(cls.gold_action(t)) if cls.multi_step else 1
        first = cls.render_messages(t)[0]
        key = (first["content"] if first["role"] == "system" else "", t.prompt)
        assert key not in scripts, key
        scripts[key] = [cls.gold_text(t, k) for k in range(turns)]
    return ScriptedClient(tokenizer, scripts)


# ------------------------------------------------------------------------------------------------ configs
def test_role_configs_pass_verls_validation_for_every_benchmark():
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import HFModelConfig, RolloutConfig

    for name in BENCHMARKS:
        cfg = compose_config(["engine=verl_ray", "profile=paper", f"benchmark={name}"])
        for role in ("agent", "env_policy"):
            rcfg = role_config(cfg, role)
            validate_role_config(rcfg)  # veRL's validate_config + the engine's own conditions
            a = rcfg.actor_rollout_ref
            actor = omega_conf_to_dataclass(a.actor)  # as ActorRolloutRefWorker.init_model converts them
            rollout = omega_conf_to_dataclass(a.rollout, dataclass_type=RolloutConfig)
            policy = cfg[role].policy
            assert actor.optim.lr == pytest.approx(policy.lr) and actor.kl_loss_coef == pytest.approx(policy.kl_coef)
            assert actor.use_kl_loss and actor.kl_loss_type == "low_var_kl" and actor.loss_agg_mode == "token-mean"
            assert actor.clip_ratio_low == actor.clip_ratio_high == pytest.approx(policy.clip_ratio)
            assert actor.ppo_micro_batch_size_per_gpu == policy.micro_batch_size and actor.optim.weight_decay == 0.0
            assert rcfg.trainer.n_gpus_per_node == 4 and rcfg.algorithm.adv_estimator == "grpo"
            assert rollout.name == "vllm" and rollout.tensor_model_parallel_size == 2
            if role == "agent":
                assert rollout.agent.default_agent_loop == "genenv_gym" and rollout.n == cfg.agent.n == 8
                assert rollout.temperature == pytest.approx(cfg.agent.temperature)
                assert rcfg.data.train_batch_size == actor.ppo_mini_batch_size == 64
                assert rollout.prompt_length == 6144
            else:
                assert rollout.agent.default_agent_loop == "single_turn_agent"
                assert rollout.n == cfg.generation.generations_per_prompt
                assert rollout.response_length == cfg.generation.max_new_tokens  # the benchmark's, else the paper's
    multi = role_config(compose_config(["engine=verl_ray", "benchmark=twx"]), "agent")
    single = role_config(compose_config(["engine=verl_ray", "benchmark=bfcl"]), "agent")
    assert multi.actor_rollout_ref.rollout.response_length == 2048  # twx: agent.response_length
    assert single.actor_rollout_ref.rollout.response_length == 96  # one turn of agent.max_new_tokens
    model = omega_conf_to_dataclass(single.actor_rollout_ref.model, dataclass_type=HFModelConfig)
    assert model.hf_config.model_type == "llama"  # the real SmolLM2 folder, loaded by veRL


def test_every_verl_key_stays_settable_and_veRL_rejects_bad_configs(smollm2_dir):
    cfg = compose_config(["engine=verl_ray", "benchmark=bamboogle",
                          "verl_ray.common.actor_rollout_ref.rollout.gpu_memory_utilization=0.7",
                          "+verl_ray.env_policy.actor_rollout_ref.actor.entropy_coeff=0.01",
                          "verl_ray.compose_overrides=['+actor_rollout_ref.rollout.engine_kwargs.vllm.seed=3']"])
    agent, env = role_config(cfg, "agent"), role_config(cfg, "env_policy")
    utilization = [c.actor_rollout_ref.rollout.gpu_memory_utilization for c in (agent, env)]
    assert utilization == [0.7, 0.7]
    assert env.actor_rollout_ref.actor.entropy_coeff == 0.01 and agent.actor_rollout_ref.actor.entropy_coeff == 0
    assert agent.actor_rollout_ref.rollout.engine_kwargs.vllm.seed == 3
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="genenv.configs", version_base="1.3"):  # as inside genenv-train
        assert role_config(cfg, "env_policy").actor_rollout_ref.actor.entropy_coeff == 0.01
        assert compose(config_name="train").engine == "local"  # the running Hydra context is restored
    with pytest.raises(ConfigKeyError):  # a key veRL does not have
        role_config(compose_config(["engine=verl_ray", "+verl_ray.agent.actor_rollout_ref.actor.lr_typo=1"]), "agent")
    odd = compose_config(["engine=verl_ray", "benchmark=bamboogle", "verl_ray.pools.agent.n_gpus_per_node=5"])
    with pytest.raises(AssertionError, match="must be divisible"):  # 6 tasks x n 4 over 5 GPUs: veRL's own check
        validate_role_config(role_config(odd, "agent"))
    with pytest.raises(ValueError, match="temperature"):
        validate_role_config(role_config(compose_config(["engine=verl_ray", "generation.temperature=0"]), "env_policy"))
    critic = compose_config(["engine=verl_ray", "+verl_ray.agent.critic.enable=true",
                             "+verl_ray.agent.critic.ppo_micro_batch_size_per_gpu=2",
                             "+verl_ray.agent.critic.ppo_mini_batch_size=6",
                             f"+verl_ray.agent.critic.model.path={smollm2_dir}"])
    with pytest.raises(ValueError, match="critic.enable=false"):  # veRL accepts it; this engine does not
        validate_role_config(role_config(critic, "agent"))


# ------------------------------------------------------------------------------------------ resource pools
def test_resource_pools_and_refusal_without_gpus(paper_cfg, ray_cluster):
    from genenv.trainer.engines import build_backend

    assert resource_pool_spec(paper_cfg) == {"genenv_agent_pool": [4], "genenv_env_policy_pool": [4]}
    two = compose_config(["engine=verl_ray", "verl_ray.pools.agent.nnodes=2", "verl_ray.pools.agent.n_gpus_per_node=8"])
    assert resource_pool_spec(two) == {"genenv_agent_pool": [8, 8], "genenv_env_policy_pool": [4]}
    mgr = resource_pool_manager(paper_cfg)
    assert mgr.mapping == {"agent": "genenv_agent_pool", "env_policy": "genenv_env_policy_pool"} and mgr.get_n_gpus() == 8
    check_cluster_gpus({"a": [4], "b": [4]}, [8.0])
    check_cluster_gpus({"a": [4, 4], "b": [4]}, [4.0, 4.0, 4.0])
    with pytest.raises(RuntimeError, match="no Ray node has more than 4"):
        check_cluster_gpus({"a": [8], "b": [4]}, [4.0, 4.0, 4.0, 4.0])
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError) as err:  # this Ray cluster has no GPU
        build_backend(paper_cfg)
    assert "needs 8 GPU(s)" in str(err.value) and "has 0 GPU(s)" in str(err.value) and "ray start" in str(err.value)
    assert time.perf_counter() - t0 < 60
    from ray.util import placement_group_table

    assert placement_group_table() == {}  # nothing was placed, so nothing can hang
    unknown = compose_config(["engine=local"])
    unknown.engine = "nope"
    with pytest.raises(ValueError, match="choose one of .*local.*verl_ray"):
        build_backend(unknown)


def test_two_roles_number_their_rollout_replicas_apart(ray_cluster, paper_cfg):
    """veRL names vLLM servers and weight-sync sockets by replica rank; the env policy's replicas come after the
    agent's on the server side (veRL's LLMServerManager with our replica class) and the worker side alike."""
    from types import SimpleNamespace

    from omegaconf import open_dict
    from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry

    from genenv.trainer.engines.verl_ray.workers import GenEnvLLMServerManager, worker_replica_rank

    launched = []

    class ProbeReplica(RolloutReplica):  # stands in for vLLMReplica.launch_servers, which starts vLLM on GPUs
        async def launch_servers(self):
            launched.append((self.replica_rank, list(self.workers)))
            self._server_address, self._server_handle = f"probe:{self.replica_rank}", None

    RolloutReplicaRegistry.register("genenv_probe", lambda: ProbeReplica)
    try:
        offset = 0
        for role in ("agent", "env_policy"):
            rcfg = role_config(paper_cfg, role)  # 4 GPUs per pool, tensor parallel 2: two replicas per role
            with open_dict(rcfg):
                rcfg.actor_rollout_ref.rollout.name = "genenv_probe"
            group = SimpleNamespace(workers=[f"{role}{i}" for i in range(4)], world_size=4)
            manager = GenEnvLLMServerManager.create(config=rcfg, worker_group=group, start_rank=offset)
            assert [r.replica_rank for r in manager.get_replicas()] == [offset, offset + 1]
            ranks = [worker_replica_rank(i, offset, rcfg.actor_rollout_ref.rollout) for i in range(4)]
            assert ranks == [offset, offset, offset + 1, offset + 1]
            offset += len(manager.get_replicas())
            ray_cluster.kill(manager.global_load_balancer)
    finally:
        RolloutReplicaRegistry._registry.pop("genenv_probe", None)
    assert launched == [(0, ["agent0", "agent1"]), (1, ["agent2", "agent3"]),
                        (2, ["env_policy0", "env_policy1"]), (3, ["env_policy2", "env_policy3"])]


def test_launch_script_commands_compose_and_pass_verls_validation(tmp_path):
    """scripts/launch_verl_ray.sh (DRY_RUN=1 prints instead of running): its genenv-train arguments for one 8-GPU
    node and for a 2-node job compose, fill both pools and pass veRL's validation. Starting Ray and the run
    needs GPUs."""
    import shlex
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "launch_verl_ray.sh"
    env = {**os.environ, "DRY_RUN": "1", "RUN_DIR": str(tmp_path / "run")}

    def args_of(*argv):
        out = subprocess.run(["bash", str(script), *argv], env=env, capture_output=True, text=True, check=True)
        words = shlex.split(out.stdout)
        return words[words.index("genenv-train") + 1:], words

    single, _ = args_of("single", "bamboogle", "smollm2")
    multi, words = args_of("submit", "10.0.0.1", "bamboogle", "smollm2", "1", "1")
    assert words[:3] == ["ray", "job", "submit"] and "--address=http://10.0.0.1:8265" in words
    for overrides, gpus in ((single, {"genenv_agent_pool": [4], "genenv_env_policy_pool": [4]}),
                            (multi, {"genenv_agent_pool": [8], "genenv_env_policy_pool": [8]})):
        cfg = compose_config(overrides)
        assert cfg.engine == "verl_ray" and cfg.agent.batch_tasks == 64 and resource_pool_spec(cfg) == gpus
        for role in ("agent", "env_policy"):
            validate_role_config(role_config(cfg, role))
    head = subprocess.run(["bash", str(script), "head"], env=env, capture_output=True, text=True, check=True).stdout
    assert shlex.split(head)[:3] == ["ray", "start", "--head"]


# ------------------------------------------------------------------------------------------------------ data
def test_parquet_of_every_env_loads_through_verls_dataset(agent_rcfg, tokenizer, tmp_path):
    from copy import deepcopy

    from omegaconf import open_dict

    data_cfg = deepcopy(agent_rcfg.data)
    with open_dict(data_cfg):
        data_cfg.filter_overlong_prompts = True  # veRL drops prompts over data.max_prompt_length: none may go
    tasks = [t for name in BENCHMARKS for t in sample_tasks(name, 2)]
    batch = tasks_to_batch(tasks, 3, tokenizer, data_cfg, tmp_path / "rows.parquet")
    nt = batch.non_tensor_batch
    assert len(batch) == 3 * len(tasks) and list(nt["uid"][:6]) == [tasks[0].id] * 3 + [tasks[1].id] * 3
    for i, t in enumerate(tasks):
        row = 3 * i
        assert list(nt["raw_prompt"][row]) == render_messages(t)
        assert nt["data_source"][row] == f"genenv/{t.benchmark}"
        assert nt["extra_info"][row]["task_id"] == t.id
        assert Task.from_json(nt["extra_info"][row]["task_json"]) == t
    too_short = deepcopy(data_cfg)
    with open_dict(too_short):
        too_short.max_prompt_length = 200
    with pytest.raises(ValueError, match="RLHFDataset returned"):
        tasks_to_batch(tasks, 1, tokenizer, too_short, tmp_path / "short.parquet")


# ------------------------------------------------------------------------------------------------ agent loop
def _worker_config(max_new_tokens: int = 256):
    """The config the engine gives veRL's agent-loop workers, with room for the longest gold episodes."""
    cfg = compose_config(["engine=verl_ray", "benchmark=bamboogle", "agent.response_length=16384",
                          f"agent.max_new_tokens={max_new_tokens}"])
    return agent_loop_worker_config(role_config(cfg, "agent"), max_new_tokens=max_new_tokens)


def test_verls_agent_loop_worker_plays_gold_episodes_of_every_env(paper_cfg, tokenizer, tmp_path):
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from genenv.trainer.engines.verl_ray.workers import GymAgentLoopWorker  # loading it registers genenv_gym

    assert GymAgentLoopWorker.__mro__[1] is AgentLoopWorker and not vars(GymAgentLoopWorker).keys() - {
        "__module__", "__doc__", "__qualname__", "__firstlineno__", "__static_attributes__"}  # veRL's, unchanged
    config = _worker_config(max_new_tokens=512)  # a TravelPlanner gold plan is one turn of up to ~430 tokens
    tasks = [t for name in BENCHMARKS for t in sample_tasks(name, 2)]
    batch = tasks_to_batch(tasks, 1, tokenizer, config.data, tmp_path / "rows.parquet")
    client = gold_client(tokenizer, tasks)
    worker = GymAgentLoopWorker(config, client)  # veRL's code: registry lookup, hydra.instantiate, postprocess
    output = asyncio.run(worker.generate_sequences(batch))
    trajs = trajectories_from_output(tasks, 1, output)
    assert [t.reward for t in trajs] == [1.0] * len(tasks), [(t.task.id, t.info.get("error")) for t in trajs]
    assert all(t.success for t in trajs) and all(not s for s in client.scripts.values())
    assert output.batch["responses"].shape[1] == 16384 and output.batch["prompts"].shape[1] == 6144
    for t in trajs:
        cls = ENVS[t.task.benchmark].env_class
        segments = t.segments()
        if cls.prompt_window is None:  # one packed sequence; observations are masked out
            (seg,) = segments
            mask = seg.response_mask
            assert len(mask) == len(seg.response_ids) > 0 and mask[0] == mask[-1] == 1
            assert (0 in mask) == cls.multi_step
        else:  # a windowed prompt: one sequence per turn
            assert len(segments) == len(t.turns) > 1 and all(set(s.response_mask) == {1} for s in segments)
        assert segments[0].prompt_ids == list(tokenizer.apply_chat_template(
            render_messages(t.task), add_generation_prompt=True, tokenize=True)["input_ids"])


def test_verls_agent_loop_worker_with_a_cpu_model(paper_cfg, tiny_model_dir, tmp_path):
    from genenv.trainer.engines.verl_ray.workers import GymAgentLoopWorker

    from genenv.trainer.rollout.agent_loop import LocalGenerateClient
    from genenv.trainer.rollout.policies import TransformersPolicy

    policy = TransformersPolicy(str(tiny_model_dir), batch_size=8)
    config = _worker_config(max_new_tokens=6)
    tasks = sample_tasks("bamboogle", 2) + sample_tasks("api_bank_plan", 1)
    batch = tasks_to_batch(tasks, 2, policy.tokenizer, config.data, tmp_path / "rows.parquet")
    output = asyncio.run(GymAgentLoopWorker(config, LocalGenerateClient(policy)).generate_sequences(batch))
    trajs = trajectories_from_output(tasks, 2, output)
    assert [t.task.id for t in trajs] == [t.id for t in tasks for _ in range(2)]
    for t in trajs:  # genenv.max_new_tokens caps every turn (veRL's worker sends no max_tokens)
        assert 0.0 <= t.reward <= 1.0 and t.turns
        assert all(0 < len(turn.response_ids) <= 6 for turn in t.turns), [len(u.response_ids) for u in t.turns]


def test_agent_loop_manager_on_ray_runs_genenv_gym_in_worker_processes(ray_cluster, paper_cfg, tokenizer, tmp_path):
    import ray.cloudpickle

    import test_conformance
    from genenv.trainer.engines.verl_ray.workers import GenEnvAgentLoopManager

    ray.cloudpickle.register_pickle_by_value(test_conformance)  # the scripted client travels to the workers
    try:
        config = _worker_config()
        with __import__("omegaconf").open_dict(config):
            config.actor_rollout_ref.rollout.agent.num_workers = 1
        tasks = sample_tasks("bamboogle", 2) + sample_tasks("api_bank_plan", 1)
        batch = tasks_to_batch(tasks, 1, tokenizer, config.data, tmp_path / "rows.parquet")
        manager = GenEnvAgentLoopManager.create(config=config, llm_client=gold_client(tokenizer, tasks))
        workers = manager.agent_loop_workers
        pid = os.getpid()
        assert len(workers) == 1 and ray_cluster.get(workers[0].__ray_call__.remote(lambda self: os.getpid())) != pid
        trajs = trajectories_from_output(tasks, 1, manager.generate_sequences(batch))
        assert [t.reward for t in trajs] == [1.0, 1.0, 1.0] and all(t.success for t in trajs)
        for w in workers:
            ray_cluster.kill(w)
    finally:
        ray.cloudpickle.unregister_pickle_by_value(test_conformance)


# ------------------------------------------------------------------------------------------------------ reward
def test_compute_score_through_verls_reward_loader(agent_rcfg, tokenizer, tmp_path):
    from verl import DataProto
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    from genenv.trainer.updates.batch import build_batch

    assert agent_rcfg.reward.custom_reward_function.path == "pkg://genenv.trainer.engines.verl_ray.reward"
    single = [n for n in BENCHMARKS if not ENVS[n].env_class.multi_step]
    tasks = [t for n in single for t in sample_tasks(n, 2)]
    rows = tasks_to_batch(tasks, 1, tokenizer, agent_rcfg.data, tmp_path / "rows.parquet")

    def item(i: int, text: str) -> DataProto:
        response = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.pad_token_id]
        b = build_batch([[1, 2]], [response], tokenizer.pad_token_id,
                        non_tensors={k: [rows.non_tensor_batch[k][i]]
                                     for k in ("data_source", "reward_model", "extra_info")})
        return b

    async def score_all():
        worker = RewardLoopWorker(agent_rcfg)  # veRL: load_reward_manager -> get_custom_reward_fn -> our function
        gold = [await worker.compute_score(item(i, ENVS[t.benchmark].env_class.gold_text(t, 0)))
                for i, t in enumerate(tasks)]
        garbage = [await worker.compute_score(item(i, "[{(<")) for i in range(len(tasks))]
        return gold, garbage

    gold, garbage = asyncio.run(score_all())
    assert [g["reward_score"] for g in gold] == [1.0] * len(tasks), [g["reward_extra_info"] for g in gold]
    assert all(g["reward_extra_info"]["success"] for g in gold)
    assert [g["reward_score"] for g in garbage] == [0.0] * len(tasks)
    assert all(g["reward_extra_info"]["error"] for g in garbage)

    from genenv.trainer.engines.verl_ray.reward import compute_score

    multi = to_verl_row(sample_tasks("twx", 1)[0])
    with pytest.raises(ValueError, match="multi-step"):
        compute_score(multi["data_source"], "look around", multi["reward_model"]["ground_truth"], multi["extra_info"])
    row = to_verl_row(tasks[0])
    with pytest.raises(ValueError, match="ground_truth"):
        compute_score(row["data_source"], "x", '"another answer"', row["extra_info"])

    # env options reach compute_score through veRL's reward_kwargs (set by a compose override, as documented)
    from verl.trainer.ppo.reward import get_custom_reward_fn

    em = "+reward.custom_reward_function.reward_kwargs.env_kwargs.bamboogle.metric=exact_match"
    em_cfg = compose_config(["engine=verl_ray", "benchmark=bamboogle", f"verl_ray.compose_overrides=['{em}']"])
    score_em = get_custom_reward_fn(role_config(em_cfg, "agent"))
    task = sample_tasks("bamboogle", 1)[0]
    row = to_verl_row(task)
    args = dict(data_source=row["data_source"], solution_str=f"Answer: {task.gold} and more",
                ground_truth=row["reward_model"]["ground_truth"], extra_info=row["extra_info"])
    assert score_em(**args)["score"] == 0.0 and 0.0 < compute_score(**args)["score"] < 1.0  # EM vs default F1


# ------------------------------------------------------------------------------------------------------ update
def _sequence_log_probs(model, input_ids_nested) -> torch.Tensor:
    """What veRL's training engine returns as ``log_probs`` for a no-padding batch: for every token position of
    every sequence, the log-prob of the next token (the last position of a sequence is unused), as a nested
    tensor over the same offsets."""
    values = []
    with torch.no_grad():
        for seq in input_ids_nested.unbind():
            logp = torch.log_softmax(model(input_ids=seq[None]).logits[0].float(), -1)
            values.append(torch.cat([logp[:-1].gather(-1, seq[1:, None]).squeeze(-1), torch.zeros(1)]))
    return torch.nested.nested_tensor_from_jagged(torch.cat(values), offsets=input_ids_nested.offsets())


def test_update_batch_under_verls_ppo_loss_gives_the_local_loss(tiny_model_dir):
    from transformers import AutoModelForCausalLM
    from verl.trainer.ppo import core_algos
    from verl.utils import tensordict_utils as tu
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.utils.losses import ppo_loss

    from genenv.trainer.updates.batch import response_logprobs

    cfg = compose_config(["engine=verl_ray", "benchmark=bamboogle", "agent.policy.kl_coef=0.5",
                          "agent.policy.clip_ratio=0.1", f"agent.policy.model={tiny_model_dir}"])
    actor = omega_conf_to_dataclass(role_config(cfg, "agent").actor_rollout_ref.actor)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    old, ref = copy.deepcopy(model), copy.deepcopy(model)
    with torch.no_grad():  # the policy moved since sampling, and away from the reference
        for m, scale in ((old, 0.02), (ref, 0.05)):
            for p in m.parameters():
                p.add_(torch.randn_like(p) * scale)
    samples = [Sample([1, 17, 33], [70, 71, 72, 2], 1.0, "t"), Sample([1, 17, 33], [90, 2], 0.0, "t"),
               Sample([1, 17, 33], [80, 81, 2], 0.5, "t"),
               Sample([5, 6], [40, 41, 42, 43, 2], 1.0, "u", response_mask=[1, 1, 0, 0, 1]),
               Sample([5, 6], [50, 2], 0.0, "u"), Sample([9], [3, 2], 0.3, "v")]  # group v: one sample, dropped
    batch, metrics = prepare_update(samples, 0, "grpo")
    assert metrics["groups_kept"] == 2 and metrics["groups_dropped"] == 1 and len(batch) == 5
    padded, n_real = pad_for_workers(copy.deepcopy(batch), 4)
    assert len(padded) == 8 and n_real == 5 and padded.batch["response_mask"][5:].sum() == 0
    batch_meta(padded, 1.0, multi_turn=True)
    for b in (batch, padded):
        b.batch["old_log_probs"] = response_logprobs(old, b, autocast_dtype=None)
        b.batch["ref_log_prob"] = response_logprobs(ref, b, autocast_dtype=None)
    td = worker_tensordict(padded, **update_meta(padded, n_real, actor))
    assert tu.get(td, "global_batch_size") == 5 and tu.get(td, "mini_batch_size") == 8
    assert tu.get(td, "temperature") == 1.0 and td["input_ids"].is_nested
    # what veRL's FSDP engine adds to each mini-batch before the loss (forward_backward_batch)
    tu.assign_non_tensor(td, dp_size=1, batch_num_tokens=int(td["loss_mask"].sum()))
    verl_loss, verl_metrics = ppo_loss(actor, {"log_probs": _sequence_log_probs(model, td["input_ids"])}, td)

    log_prob = response_logprobs(model, batch, autocast_dtype=None)  # the local engine, on the real rows only
    mask = batch.batch["response_mask"].float()
    tokens = int(mask.sum())
    from omegaconf import OmegaConf

    local_cfg = OmegaConf.create({"clip_ratio": 0.1, "clip_ratio_low": 0.1, "clip_ratio_high": 0.1, "clip_ratio_c": 3.0,
                                  "global_batch_info": {"dp_size": 1, "batch_num_tokens": tokens,
                                                        "global_batch_size": 5}})
    pg, _ = core_algos.get_policy_loss_fn("vanilla")(
        old_log_prob=batch.batch["old_log_probs"], log_prob=log_prob, advantages=batch.batch["advantages"],
        response_mask=mask, loss_agg_mode="token-mean", config=local_cfg)
    kl = core_algos.agg_loss(core_algos.kl_penalty(log_prob, batch.batch["ref_log_prob"], "low_var_kl"), mask,
                             "token-mean", batch_num_tokens=tokens)
    assert float(kl) > 1e-3 and abs(float(pg)) > 1e-3  # both terms carry weight
    assert float(verl_loss) == pytest.approx(float(pg + 0.5 * kl), rel=1e-4, abs=1e-6)
    assert verl_metrics["kl_coef"] == 0.5


def test_verl_policy_generates_through_a_generate_client(tiny_model_dir):
    from genenv.trainer.rollout.agent_loop import LocalGenerateClient
    from genenv.trainer.rollout.policies import Prompt, TransformersPolicy

    local = TransformersPolicy(str(tiny_model_dir), batch_size=8)
    policy = VerlPolicy("tiny:agent", LocalGenerateClient(local), local.tokenizer)
    prompts = [Prompt([{"role": "user", "content": q}]) for q in ("Who wrote Hamlet?", "2+2?")]
    gens = policy.generate(prompts, n=3, temperature=1.0, max_new_tokens=5)
    assert [len(g) for g in gens] == [3, 3]
    for p, group in zip(prompts, gens):
        assert all(g.prompt_ids == local.encode_prompt(p.messages) and 0 < len(g.response_ids) <= 5 for g in group)
        assert all(g.text == local.tokenizer.decode(g.response_ids, skip_special_tokens=True) for g in group)
    greedy = policy.generate(prompts[:1], n=2, temperature=0.0, max_new_tokens=5)[0]
    assert greedy[0].response_ids == greedy[1].response_ids == local.generate(prompts[:1], 1, 0.0, 5)[0][0].response_ids
