"""The ``verl_ray`` engine against the real veRL 0.9.1, everything that runs without a GPU.

- the composed per-role configs pass veRL's own validation and convert to veRL's config dataclasses as its
  workers convert them; our settings land on veRL's keys; every veRL key stays settable; typos and configs veRL
  rejects fail;
- the two resource pools map to veRL's ``ResourcePoolManager``, and ``engine=verl_ray`` on a Ray cluster without
  the GPUs, or with the GPUs but without the CPUs veRL's placement-group bundles reserve, fails at once with what it
  needs (no placement group is ever created);
- the reference-in-actor decision reads LoRA as veRL's trainer does (``lora_rank``, ``lora.rank``,
  ``lora_adapter_path``); the backend's weight sync keeps the training engine's work (update, fingerprint, save,
  load) to times when the vLLM replicas sleep (a recording stand-in for the worker group and weight sync);
- the environment policy samples with the ``top_p``/``top_k`` veRL's agent-loop worker sends the agent's
  rollouts; the server's log-probs reach veRL's ``rollout_log_probs``;
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
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf.errors import ConfigKeyError
from verl.workers.rollout.replica import TokenOutput

from genenv.envs import ENVS
from genenv.envs.registry import render_messages
from genenv.envs.task import Task
from genenv.envs.verl_rows import to_verl_row
from genenv.trainer.cli import compose_config
from genenv.trainer.generation import run_generation_budget
from genenv.trainer.settings import run_settings
from genenv.trainer.engines.verl_ray.batches import (batch_meta, pad_for_workers, tasks_to_batch,
                                                     trajectories_from_output, update_meta, worker_tensordict)
from genenv.trainer.engines.verl_ray.config import (agent_loop_worker_config, ref_in_actor, role_config,
                                                    validate_role_config)
from genenv.trainer.engines.verl_ray.policy import VerlPolicy
from genenv.trainer.engines.verl_ray.pools import (check_cluster, cluster_nodes, resource_pool_manager,
                                                   resource_pool_spec)
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
    return role_config(run_settings(paper_cfg), "agent")


@pytest.fixture(scope="module")
def tokenizer(agent_rcfg):
    """The tokenizer veRL's workers load (``HFModelConfig`` of the agent's model: the real SmolLM2 folder)."""
    from verl.utils.config import omega_conf_to_dataclass

    from genenv.runtime.models import prepare_tokenizer

    tok = omega_conf_to_dataclass(agent_rcfg.actor_rollout_ref.model).tokenizer
    prepare_tokenizer(tok)
    return tok


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray of 2 CPUs that declares 8 GPUs (Ray only counts them; nothing here asks for a device), shut
    down after the module."""
    import ray

    ray.init(num_cpus=2, num_gpus=8, include_dashboard=False, log_to_driver=False)
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
            rcfg = role_config(run_settings(cfg), role)
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
                # the budget its generation schema needs (trainer/generation.py: generation_budget)
                assert rollout.response_length == run_generation_budget(run_settings(cfg)) > 0
    multi = role_config(run_settings(compose_config(["engine=verl_ray", "benchmark=twx"])), "agent")
    single = role_config(run_settings(compose_config(["engine=verl_ray", "benchmark=bfcl"])), "agent")
    assert multi.actor_rollout_ref.rollout.response_length == 2048  # twx: agent.response_length
    assert single.actor_rollout_ref.rollout.response_length == 96  # one turn of agent.max_new_tokens
    model = omega_conf_to_dataclass(single.actor_rollout_ref.model, dataclass_type=HFModelConfig)
    assert model.hf_config.model_type == "llama"  # the real SmolLM2 folder, loaded by veRL


def test_every_verl_key_stays_settable_and_veRL_rejects_bad_configs(smollm2_dir):
    cfg = compose_config(["engine=verl_ray", "benchmark=bamboogle",
                          "verl_ray.common.actor_rollout_ref.rollout.gpu_memory_utilization=0.7",
                          "+verl_ray.env_policy.actor_rollout_ref.actor.entropy_coeff=0.01",
                          "verl_ray.compose_overrides=['+actor_rollout_ref.rollout.engine_kwargs.vllm.seed=3']"])
    agent, env = role_config(run_settings(cfg), "agent"), role_config(run_settings(cfg), "env_policy")
    utilization = [c.actor_rollout_ref.rollout.gpu_memory_utilization for c in (agent, env)]
    assert utilization == [0.7, 0.7]
    assert env.actor_rollout_ref.actor.entropy_coeff == 0.01 and agent.actor_rollout_ref.actor.entropy_coeff == 0
    assert agent.actor_rollout_ref.rollout.engine_kwargs.vllm.seed == 3
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="genenv.configs", version_base="1.3"):  # as inside genenv-train
        assert role_config(run_settings(cfg), "env_policy").actor_rollout_ref.actor.entropy_coeff == 0.01
        assert compose(config_name="train").engine == "local"  # the running Hydra context is restored
    with pytest.raises(ConfigKeyError):  # a key veRL does not have
        role_config(run_settings(compose_config(["engine=verl_ray", "+verl_ray.agent.actor_rollout_ref.actor.lr_typo=1"])), "agent")
    odd = compose_config(["engine=verl_ray", "benchmark=bamboogle", "verl_ray.pools.agent.n_gpus_per_node=5"])
    with pytest.raises(AssertionError, match="must be divisible"):  # 6 tasks x n 4 over 5 GPUs: veRL's own check
        validate_role_config(role_config(run_settings(odd), "agent"))
    with pytest.raises(ValueError, match="temperature"):
        validate_role_config(role_config(run_settings(compose_config(["engine=verl_ray", "generation.temperature=0"])), "env_policy"))
    critic = compose_config(["engine=verl_ray", "+verl_ray.agent.critic.enable=true",
                             "+verl_ray.agent.critic.ppo_micro_batch_size_per_gpu=2",
                             "+verl_ray.agent.critic.ppo_mini_batch_size=6",
                             f"+verl_ray.agent.critic.model.path={smollm2_dir}"])
    with pytest.raises(ValueError, match="critic.enable=false"):  # veRL accepts it; this engine does not
        validate_role_config(role_config(run_settings(critic), "agent"))


def test_reference_in_actor_reads_lora_as_verls_trainer(monkeypatch):
    """LoRA turns the reference into the actor without its adapter; veRL's trainer reads the nested ``lora.rank``
    (Megatron's block), then ``lora_rank`` (FSDP's), and ``lora_adapter_path``: so do we, compared with veRL's own
    ``RayPPOTrainer.__init__`` (dataset loading stubbed) on the same configs."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.trainer.ppo.utils import Role

    from genenv.trainer.engines.verl_ray.config import lora_rank

    monkeypatch.setattr(RayPPOTrainer, "_create_dataloader", lambda self, *args, **kwargs: None)
    monkeypatch.setattr(RayPPOTrainer, "_init_dump_executor", lambda self: None)

    def verls(rcfg) -> bool:
        return RayPPOTrainer(rcfg, tokenizer=None, role_worker_mapping={Role.ActorRollout: object},
                             resource_pool_manager=None).ref_in_actor

    cases = {"no LoRA": ([], 0, False),
             "lora_rank": (["agent.policy.lora_r=8"], 8, True),  # our key, written to veRL's model.lora_rank
             "lora.rank": (["+verl_ray.common.actor_rollout_ref.model.lora.rank=16"], 16, True),
             "both": (["agent.policy.lora_r=8", "+verl_ray.common.actor_rollout_ref.model.lora.rank=16"], 16, True),
             "adapter": (["+verl_ray.common.actor_rollout_ref.model.lora_adapter_path=/adapters/a"], 0, True)}
    for name, (overrides, rank, expected) in cases.items():
        rcfg = role_config(run_settings(compose_config(["engine=verl_ray", "benchmark=bamboogle", *overrides])), "agent")
        model = rcfg.actor_rollout_ref.model
        assert (lora_rank(model), ref_in_actor(model), verls(rcfg)) == (rank, expected, expected), name


def test_a_local_checkpoint_as_a_roles_model_gives_verl_that_roles_weights_or_adapter(tiny_model_dir, tmp_path):
    """A run dir of the ``local`` engine as a role's model (the warm start) gives veRL that role's folder of the
    newest checkpoint: full weights as ``model.path``; a LoRA adapter as ``lora_adapter_path`` on its base model,
    which veRL loads only with a LoRA rank; a folder with neither (a veRL checkpoint's shards) is refused."""
    import random

    from genenv.trainer.task_pool import TaskPool
    from genenv.trainer.checkpoint import save_checkpoint
    from genenv.trainer.engines.local import build_local_backend
    from genenv.trainer.updates import Sample

    run = tmp_path / "run"
    roles = [f"agent.policy.model={tiny_model_dir}", f"env_policy.policy.model={tiny_model_dir}",
             "env_policy.policy.lora_r=4", "threads=1"]
    backend = build_local_backend(run_settings(compose_config(roles)))
    save_checkpoint(tmp_path / "untrained" / "checkpoints", 1, backend, TaskPool(), {}, random.Random(0), keep=1)
    backend.update("agent", [Sample([1, 2], [3, 2], 1.0, "a"), Sample([1, 2], [4, 2], 0.0, "a")], "grpo")
    save_checkpoint(run / "checkpoints", 3, backend, TaskPool(), {}, random.Random(0), keep=1)
    newest = run / "checkpoints" / "iter-00003"
    assert (newest / "agent" / "config.json").is_file() and (newest / "env_policy" / "adapter_config.json").is_file()

    def model(role, *overrides):
        rcfg = role_config(run_settings(compose_config(["engine=verl_ray", "benchmark=bamboogle", *overrides])), role)
        return rcfg, rcfg.actor_rollout_ref.model

    _, agent = model("agent", f"agent.policy.model={run}")
    assert (agent.path, agent.lora_adapter_path) == (str(newest / "agent"), None)
    _, agent = model("agent", f"agent.policy.model={tmp_path / 'untrained'}")  # never updated: no folder, its model
    assert not (tmp_path / "untrained" / "checkpoints" / "iter-00001" / "agent").exists()
    assert (agent.path, agent.lora_adapter_path) == (str(Path(tiny_model_dir).resolve()), None)
    rcfg, env = model("env_policy", f"env_policy.policy.model={run}", "env_policy.policy.lora_r=4")
    assert (env.path, env.lora_adapter_path) == (str(tiny_model_dir), str(newest / "env_policy"))
    assert ref_in_actor(env)
    rcfg, _ = model("env_policy", f"env_policy.policy.model={newest}")  # no LoRA rank: veRL would drop the adapter
    with pytest.raises(ValueError, match="lora_r"):
        validate_role_config(rcfg)
    _, smollm2 = model("agent")  # the alias still resolves to the converted folder
    assert Path(smollm2.path).joinpath("config.json").is_file() and smollm2.lora_adapter_path is None
    for f in (newest / "agent").iterdir():  # what a verl_ray checkpoint holds instead: FSDP shards
        if f.name in ("config.json", "adapter_config.json"):
            f.unlink()
    with pytest.raises(ValueError, match="model_merger"):
        model("agent", f"agent.policy.model={run}")


# ------------------------------------------------------------------------------------------ resource pools
def test_cluster_check_packs_gpus_and_cpus_of_verls_bundles():
    """veRL reserves, per GPU of a pool, a bundle of 1 GPU and ``max_colocate_count`` CPUs, the bundles of one
    pool's node share in one STRICT_PACK placement group: the check packs those groups onto the nodes."""
    check_cluster({"a": [4], "b": [4]}, [(8.0, 24.0)], 3)
    check_cluster({"a": [4, 4], "b": [4]}, [(4.0, 12.0)] * 3, 3)
    check_cluster({"a": [6], "b": [2]}, [(2.0, 6.0), (6.0, 18.0)], 3)  # the large share takes the large node
    cases = [({"a": [4], "b": [4]}, [(8.0, 16.0)], "has 16 CPU(s) in total"),  # enough GPUs, too few CPUs
             ({"a": [4], "b": [4]}, [(6.0, 24.0)], "has 6 GPU(s) in total"),
             ({"a": [8], "b": [4]}, [(4.0, 12.0)] * 4, "no Ray node has more than 4 GPU(s)"),
             ({"a": [4], "b": [2]}, [(4.0, 6.0), (2.0, 14.0)], "no Ray node has both"),
             ({"a": [4], "b": [4]}, [(6.0, 18.0), (2.0, 6.0)], "do not fit on the nodes together")]
    for spec, nodes, problem in cases:
        with pytest.raises(RuntimeError) as err:
            check_cluster(spec, nodes, 3)
        assert problem in str(err.value) and "ray start" in str(err.value), str(err.value)
    assert "needs 8 GPU(s) and 24 CPU(s)" in str(err.value) and "3 CPU(s) per GPU" in str(err.value)


def test_resource_pools_and_refusal_of_a_cluster_short_of_gpus_or_cpus(paper_cfg, ray_cluster, monkeypatch):
    from ray.util import placement_group_table

    from genenv.trainer.engines import build_backend
    from genenv.trainer.engines.verl_ray.backend import VerlRayBackend

    def placing(self, role, offset):  # past the checks, the worker group would wait in pg.ready() forever
        raise AssertionError(f"engine=verl_ray went on to place the {role} pool on a cluster that cannot hold it")

    monkeypatch.setattr(VerlRayBackend, "_build_role", placing)

    assert resource_pool_spec(run_settings(paper_cfg)) == {"genenv_agent_pool": [4], "genenv_env_policy_pool": [4]}
    two = compose_config(["engine=verl_ray", "verl_ray.pools.agent.nnodes=2", "verl_ray.pools.agent.n_gpus_per_node=8"])
    assert resource_pool_spec(run_settings(two)) == {"genenv_agent_pool": [8, 8], "genenv_env_policy_pool": [4]}
    mgr = resource_pool_manager(run_settings(paper_cfg))
    assert mgr.mapping == {"agent": "genenv_agent_pool", "env_policy": "genenv_env_policy_pool"} and mgr.get_n_gpus() == 8
    assert cluster_nodes() == [(8.0, 2.0)]
    wide = compose_config(["engine=verl_ray", "verl_ray.pools.agent.n_gpus_per_node=8",
                           "verl_ray.pools.env_policy.n_gpus_per_node=8"])
    # 8 GPUs (declared) and 2 CPUs: the paper's pools fit the GPUs but not the 24 CPUs their bundles reserve, where
    # veRL's own check (GPUs only) passes and Ray would wait forever in pg.ready()
    for cfg, needs, short in ((wide, "needs 16 GPU(s)", "has 8 GPU(s) in total"),
                              (paper_cfg, "needs 8 GPU(s) and 24 CPU(s)", "has 2 CPU(s) in total")):
        t0 = time.perf_counter()
        with pytest.raises(RuntimeError) as err:
            build_backend(run_settings(cfg))
        assert needs in str(err.value) and short in str(err.value) and "ray start" in str(err.value), str(err.value)
        assert time.perf_counter() - t0 < 60
        assert placement_group_table() == {}  # nothing was placed, so nothing can hang
    unknown = compose_config(["engine=local"])
    unknown.engine = "nope"
    with pytest.raises(ValueError, match="choose one of .*local.*verl_ray"):
        build_backend(run_settings(unknown))
    with pytest.raises(TypeError, match="build_backend takes the run's RunSettings, not DictConfig"):
        build_backend(paper_cfg)  # engines never read a config


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
            rcfg = role_config(run_settings(paper_cfg), role)  # 4 GPUs per pool, tensor parallel 2: two replicas per role
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
    """deploy/launch_verl_ray.sh (DRY_RUN=1 prints instead of running): its genenv-train arguments for one 8-GPU
    node and for a 2-node job compose, fill both pools and pass veRL's validation. Starting Ray and the run
    needs GPUs."""
    import shlex
    import subprocess

    script = Path(__file__).resolve().parents[1] / "deploy" / "launch_verl_ray.sh"
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
        assert cfg.engine == "verl_ray" and cfg.agent.batch_tasks == 64 and resource_pool_spec(run_settings(cfg)) == gpus
        for role in ("agent", "env_policy"):
            validate_role_config(role_config(run_settings(cfg), role))
    head = subprocess.run(["bash", str(script), "head"], env=env, capture_output=True, text=True, check=True).stdout
    assert shlex.split(head)[:3] == ["ray", "start", "--head"]


def test_launch_script_makes_relative_paths_absolute_where_it_runs(tmp_path):
    """A submitted job runs in the Ray head's working directory: relative RUN_DIR (and its default),
    GENENV_DATA_DIR and model folders are made absolute from the directory the script ran in."""
    import shlex
    import subprocess

    script = Path(__file__).resolve().parents[1] / "deploy" / "launch_verl_ray.sh"
    here = tmp_path.resolve()
    (here / "models" / "m").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("RUN_DIR", "PWD")}
    env.update(DRY_RUN="1", GENENV_DATA_DIR="data")

    def words(*argv, **extra):
        out = subprocess.run(["bash", str(script), *argv], cwd=here, env={**env, **extra}, capture_output=True,
                             text=True, check=True)
        return shlex.split(out.stdout)

    single = words("single", "bamboogle", "models/m")
    assert f"run_dir={here}/runs/bamboogle-verl" in single and f"agent.policy.model={here}/models/m" in single
    submit = words("submit", "10.0.0.1", "bamboogle", "smollm2", "1", "1", RUN_DIR="out/../run")
    assert f"run_dir={here}/run" in submit and "agent.policy.model=smollm2" in submit  # an alias stays as it is
    runtime = json.loads(next(w.split("=", 1)[1] for w in submit if w.startswith("--runtime-env-json=")))
    assert runtime["env_vars"]["GENENV_DATA_DIR"] == f"{here}/data"


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
    return agent_loop_worker_config(role_config(run_settings(cfg), "agent"), max_new_tokens=max_new_tokens)


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

    from genenv.trainer.engines.verl_ray.agent_loop import LocalGenerateClient
    from genenv.runtime.policies import TransformersPolicy

    policy = TransformersPolicy(str(tiny_model_dir), batch_size=8)
    config = _worker_config(max_new_tokens=6)
    tasks = sample_tasks("bamboogle", 2) + sample_tasks("api_bank_plan", 1)
    sizes = [2, 1, 3]  # one count per task: every group in one batch
    batch = tasks_to_batch(tasks, sizes, policy.tokenizer, config.data, tmp_path / "rows.parquet")
    assert list(batch.non_tensor_batch["uid"]) == [t.id for t, k in zip(tasks, sizes) for _ in range(k)]
    output = asyncio.run(GymAgentLoopWorker(config, LocalGenerateClient(policy)).generate_sequences(batch))
    trajs = trajectories_from_output(tasks, sizes, output)
    assert [(t.task.id, t.sample_index) for t in trajs] == [(t.id, i) for t, k in zip(tasks, sizes) for i in range(k)]
    with pytest.raises(ValueError, match="2 group sizes for 3 tasks"):
        trajectories_from_output(tasks, sizes[:2], output)
    for t in trajs:  # genenv.max_new_tokens caps every turn (veRL's worker sends no max_tokens)
        assert 0.0 <= t.reward <= 1.0 and t.turns
        assert all(0 < len(turn.response_ids) <= 6 for turn in t.turns), [len(u.response_ids) for u in t.turns]


class LogprobClient:
    """Wraps a generate client: replies with its tokens and log-probs ``-(i+1)/100``, records the sampling
    parameters and request ids it got."""

    def __init__(self, inner):
        self.inner, self.params, self.request_ids = inner, [], []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs: Any) -> TokenOutput:
        self.params.append(dict(sampling_params))
        self.request_ids.append(request_id)
        out = await self.inner.generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kwargs)
        return TokenOutput(token_ids=out.token_ids, log_probs=[-(i + 1) / 100 for i in range(len(out.token_ids))])


def test_env_policy_samples_as_verls_agent_loop_worker_does(tokenizer, tmp_path):
    """``top_p``/``top_k``: the env policy's generations (and held-out evaluation, `VerlPolicy`) use the
    values veRL's ``AgentLoopWorker`` sends the agent's rollouts, from the same veRL keys; veRL's defaults are
    plain temperature sampling, as the local engine samples (``TransformersPolicy``: ``top_p=1.0, top_k=0``)."""
    from genenv.trainer.engines.verl_ray.workers import GymAgentLoopWorker
    from genenv.runtime.policies import Prompt

    tasks = sample_tasks("bamboogle", 1)
    top = [f"+verl_ray.common.actor_rollout_ref.rollout.{key}" for key in ("top_p=0.9", "top_k=20")]
    for overrides, expected in (([], (1.0, -1)), (top, (0.9, 20))):
        rcfg = role_config(run_settings(compose_config(["engine=verl_ray", "benchmark=bamboogle", *overrides])), "agent")
        config = agent_loop_worker_config(rcfg, max_new_tokens=64)
        worker_client = LogprobClient(gold_client(tokenizer, tasks))
        batch = tasks_to_batch(tasks, 1, tokenizer, config.data, tmp_path / "rows.parquet")
        asyncio.run(GymAgentLoopWorker(config, worker_client).generate_sequences(batch))
        policy_client = LogprobClient(gold_client(tokenizer, tasks))
        policy = VerlPolicy.for_rollout("p", policy_client, tokenizer, rcfg.actor_rollout_ref.rollout)
        policy.generate([Prompt(render_messages(tasks[0]), tasks[0])], n=1, temperature=1.0, max_new_tokens=64)
        sent = {(p["top_p"], p["top_k"]) for p in worker_client.params + policy_client.params}
        assert sent == {expected}, sent


def test_server_log_probs_reach_verls_rollout_log_probs(tokenizer, tmp_path):
    """veRL's worker asks for log-probs (``rollout.calculate_log_probs``); the agent loop keeps the server's and
    veRL's postprocessing stacks them as ``rollout_log_probs`` (0.0 on environment tokens and padding); one request
    id per episode."""
    from genenv.trainer.engines.verl_ray.workers import GymAgentLoopWorker

    multi = next(n for n in BENCHMARKS if ENVS[n].env_class.multi_step and ENVS[n].env_class.prompt_window is None)
    tasks = sample_tasks("bamboogle", 2) + sample_tasks(multi, 1)
    config = _worker_config()
    client = LogprobClient(gold_client(tokenizer, tasks))
    batch = tasks_to_batch(tasks, 1, tokenizer, config.data, tmp_path / "rows.parquet")
    output = asyncio.run(GymAgentLoopWorker(config, client).generate_sequences(batch))
    assert all(p["logprobs"] for p in client.params)
    logprobs, mask = output.batch["rollout_log_probs"], output.batch["response_mask"]
    assert logprobs.shape == mask.shape
    assert bool((logprobs[mask == 0] == 0).all()) and bool((logprobs[mask == 1] < 0).all())
    n = int(mask[0].sum())  # a single-step episode: its reply's log-probs, in order
    assert logprobs[0, :n].tolist() == pytest.approx([-(i + 1) / 100 for i in range(n)])
    last = int(mask[2].nonzero().max())
    assert bool((mask[2, :last] == 0).any())  # the multi-step episode holds env tokens, masked and 0.0
    turns = len(output.non_tensor_batch["turns"][2])
    assert turns > 1 and len(set(client.request_ids)) == len(tasks) and len(client.request_ids) == turns + 2


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
    score_em = get_custom_reward_fn(role_config(run_settings(em_cfg), "agent"))
    task = sample_tasks("bamboogle", 1)[0]
    row = to_verl_row(task)
    args = dict(data_source=row["data_source"], solution_str=f"<answer>{task.gold} and more</answer>",
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
    actor = omega_conf_to_dataclass(role_config(run_settings(cfg), "agent").actor_rollout_ref.actor)
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
    from genenv.trainer.engines.verl_ray.agent_loop import LocalGenerateClient
    from genenv.runtime.policies import Prompt, TransformersPolicy

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


def test_training_engine_works_only_while_the_replicas_sleep(tokenizer, tmp_path):
    """veRL's order (``RayPPOTrainer.fit``: update, save, then ``update_weights``): the backend's update,
    fingerprint (``param_sq_sum`` gathers full tensors), save and load all run with the role's vLLM replicas
    asleep, and a role generates only with them awake, over one iteration of the loop's calls
    (``CoEvolutionTrainer.step``), a save and a load. Stand-ins record the calls of the worker group, the weight
    sync and the generate client."""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu

    from genenv.trainer.engines.verl_ray.backend import VerlRayBackend, _Role
    from genenv.runtime.policies import Prompt

    log: list[tuple[str, str]] = []

    class Group:
        world_size = 2

        def __init__(self, role):
            self.role, self.updates = role, 0

        def _log_probs(self, td, name):
            log.append((self.role, name))
            ids = td["input_ids"]
            return {"log_probs": torch.nested.nested_tensor_from_jagged(torch.full((ids.values().numel(),), -1.0),
                                                                        offsets=ids.offsets())}

        def compute_log_prob(self, td):
            return self._log_probs(td, "compute_log_prob")

        def compute_ref_log_prob(self, td):
            return self._log_probs(td, "compute_ref_log_prob")

        def update_actor(self, td):
            log.append((self.role, "update_actor"))
            self.updates += 1
            out = TensorDict({}, batch_size=[])
            tu.assign_non_tensor(out, metrics={"loss": [0.5], "grad_norm": [1.0]})
            return out

        def param_sq_sum(self):
            log.append((self.role, "param_sq_sum"))
            return [100.0 + self.updates] * self.world_size

        def save_checkpoint(self, path, *_):
            log.append((self.role, "save_checkpoint"))

        def load_checkpoint(self, path):
            log.append((self.role, "load_checkpoint"))

    class Sync:
        def __init__(self, role):
            self.role = role

        def sleep_replicas(self):
            log.append((self.role, "sleep"))

        def update_weights(self, step):
            log.append((self.role, "wake"))

    class Client:
        def __init__(self, role):
            self.role = role

        async def generate(self, request_id, *, prompt_ids, sampling_params, **_: Any) -> TokenOutput:
            log.append((self.role, "generate"))
            return TokenOutput(token_ids=[5, 2])

    cfg = compose_config(["engine=verl_ray", "benchmark=bamboogle"])
    backend = VerlRayBackend.__new__(VerlRayBackend)  # the roles' objects as _build_role hands them over
    backend.roles = {}
    for role in ("agent", "env_policy"):
        rt = _Role(role, role_config(run_settings(cfg), role))
        rt.use_ref = True
        rt.started(Group(role), Client(role), Sync(role), tokenizer)
        backend.roles[role] = rt
    initial = {r: backend.fingerprint(r) for r in backend.roles}
    prompts = [Prompt([{"role": "user", "content": "Who wrote Hamlet?"}])]
    samples = [Sample([1, 17, 33], [70, 71, 72, 2], 1.0, "t"), Sample([1, 17, 33], [90, 2], 0.0, "t"),
               Sample([5, 6], [40, 41, 2], 0.5, "u"), Sample([5, 6], [50, 2], 0.0, "u")]
    backend.policy("env_policy").generate(prompts, n=2, temperature=1.0)  # environment generation
    backend.policy("agent").generate(prompts, n=2, temperature=1.0)  # the agent's rollouts (rollout wakes alike)
    backend.update("env_policy", samples, "rwr")
    backend.update("agent", samples, "grpo")
    assert {r: backend.fingerprint(r) - initial[r] for r in backend.roles} == {"agent": 1.0, "env_policy": 1.0}
    backend.policy("agent").generate(prompts, temperature=0.0)  # held-out evaluation
    backend.save(tmp_path / "ckpt")
    backend.policy("env_policy").generate(prompts, n=2, temperature=1.0)  # the next iteration
    backend.load(tmp_path / "ckpt")
    backend.policy("agent").generate(prompts, n=2, temperature=1.0)

    awake = {"agent": True, "env_policy": True}  # vLLM servers launch awake
    for role, what in log:
        if what in ("sleep", "wake"):
            assert awake[role] == (what == "sleep"), (role, what, log)  # never twice in a row
            awake[role] = what == "wake"
        else:
            assert awake[role] == (what == "generate"), (role, what, log)
    update = ["sleep", "compute_log_prob", "compute_ref_log_prob", "update_actor", "param_sq_sum"]
    assert [w for r, w in log if r == "agent"] == (
        ["sleep", "param_sq_sum", "wake", "generate", "generate"] + update + ["wake", "generate", "sleep",
         "save_checkpoint", "load_checkpoint", "param_sq_sum", "wake", "generate", "generate"])
    assert [w for r, w in log if r == "env_policy"] == (
        ["sleep", "param_sq_sum", "wake", "generate", "generate"] + update + ["save_checkpoint", "wake", "generate",
                                                                            "generate", "sleep", "load_checkpoint",
                                                                            "param_sq_sum"])
    assert json.loads((tmp_path / "ckpt" / "backend.json").read_text())["agent"]["step"] == 1
