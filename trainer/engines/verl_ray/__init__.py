"""The ``verl_ray`` engine: the co-evolution loop's `Backend` on veRL's Ray
workers.

Each role (``agent``, ``env``) gets, for the whole run:

- its own veRL config: veRL's ``ppo_trainer`` tree composed by Hydra (`compose_verl_config`), then the
  values our config decides (`derived_settings`: model, lr, KL leash, clip ratio, epochs, micro-batches,
  temperature, lengths, GPUs), then the user's veRL keys (``verl_ray.common`` and ``verl_ray.<role>``), checked
  by veRL's own ``validate_config`` (`role_config`);
- its own Ray resource pool (`resource_pool_manager`: ``genenv_agent_pool``, ``genenv_env_policy_pool``, by
  veRL's ``ResourcePoolManager``); a cluster that cannot hold the pools' placement groups (GPUs and the CPUs veRL
  reserves per GPU) is refused before anything is placed (`check_cluster`);
- one worker group of veRL's hybrid actor/rollout/reference worker (FSDP training and a vLLM server per replica
  on the same GPUs; `GenEnvActorRolloutRefWorker`), veRL's
  ``LLMServerManager`` for its vLLM replicas (numbered after the other role's, see
  `genenv.trainer.engines.verl_ray.workers`) and ``CheckpointEngineManager`` for the weight sync, built as
  ``RayPPOTrainer.init_workers`` builds them (``verl/trainer/ppo/ray_trainer.py``), kept alive across
  iterations;
- for the agent, veRL's ``AgentLoopManager`` running our ``genenv_gym`` agent loop over parquet rows of the
  tasks read back through veRL's ``RLHFDataset`` (`tasks_to_batch`, `VerlRayBackend.rollout_agent_loop`).

The loop drives it step by step (no veRL trainer is rebuilt): ``policy(role).generate`` sends token ids to the
role's vLLM servers through veRL's ``LLMServerClient``; ``update(role, samples, estimator)`` takes the batch and
advantages of `genenv.trainer.updates.grpo.prepare_update` (the same as the local engine), pads it to the worker
group (padding rows carry no loss), puts the vLLM replicas to sleep, has the workers compute old and reference
log-probs and run the actor update (veRL's ``ppo_loss``: vanilla PPO-clip + ``low_var_kl`` to the reference) and
take the weight fingerprint; the new weights are synced into vLLM (``update_weights``) when the role generates
next, so the training engine never works beside awake replicas (veRL's order: update, save, then sync).
``save``/``load`` use the workers' checkpoint methods, with the replicas asleep.

Needs GPUs: everything that starts workers (`VerlRayBackend`). Runs on CPU and is tested there: config
composition and validation, resource-pool specs and the early refusal, parquet → ``RLHFDataset`` batches,
agent-loop outputs → trajectories, the worker-side update batch, `VerlPolicy` over any generate client, and
the order of training work and weight syncs (stand-ins for the workers).
"""

__all__ = [  # what a user may import: the public modules
    "agent_loop", "backend", "batches", "config", "policy", "pools", "reward", "workers",
]
