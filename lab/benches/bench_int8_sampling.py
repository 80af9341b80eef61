"""Would int8 weights make sampling faster without changing the policy? torch's dynamic int8 quantization
(``torch.ao.quantization.quantize_dynamic``: int8 weights, activations quantized per call, fbgemm/x86 kernels)
against the float32 model, on the embedded SmolLM2-135M-Instruct (a benchmark script that prints figures, not a
test).

    python lab/benches/bench_int8_sampling.py --rows 16 --cached 300 --repeats 2

Variants: ``int8-all`` (every ``nn.Linear``, per-tensor weight scales) and ``int8-layers`` (the decoder layers'
``nn.Linear`` only, per-channel weight scales; the tied output head stays float32). For each: the median seconds of a
decoding step at ``--rows`` sequences over ``--cached`` cached tokens (8 steps after a prefill, repeated
``--repeats`` times alternately with float32), and the policy change on real text: the first ``--tasks`` Bamboogle
training questions in the chat template followed by their gold answer, per token the absolute difference of the
log-probability float32 and int8 give the text's next token, and the share of positions whose most likely token
agrees. A sampler whose log-probs differ by more than a few hundredths of a nat samples a different policy.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from typing import Sequence

import torch


def step_seconds(model, rows: int, cached: int) -> float:
    """Median seconds of 8 greedy decoding steps after a prefill of ``rows`` x ``cached`` random tokens."""
    ids = torch.randint(100, 10_000, (rows, cached))
    with torch.no_grad():
        out = model(ids, use_cache=True)
        cache, nxt, times = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True), []
        for _ in range(8):
            t = time.perf_counter()
            out = model(nxt, past_key_values=cache, use_cache=True)
            times.append(time.perf_counter() - t)
            cache, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
    return statistics.median(times)


def policy_change(reference, model, texts: list[torch.Tensor]) -> tuple[float, float]:
    """Mean absolute log-prob difference of each text's next tokens (nats) and the share of positions whose argmax
    token agrees, over ``texts`` (``[1, T]`` token ids each)."""
    gaps, agree, n = 0.0, 0.0, 0
    with torch.no_grad():
        for ids in texts:
            a = torch.log_softmax(reference(ids).logits.float(), -1)[0, :-1]
            b = torch.log_softmax(model(ids).logits.float(), -1)[0, :-1]
            nxt = ids[0, 1:].unsqueeze(-1)
            gaps += float((a.gather(-1, nxt) - b.gather(-1, nxt)).abs().sum())
            agree += float((a.argmax(-1) == b.argmax(-1)).sum())
            n += nxt.shape[0]
    return gaps / n, agree / n


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=16)
    p.add_argument("--cached", type=int, default=300)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--tasks", type=int, default=8, help="Bamboogle training questions for the policy change")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    from genenv.benchmarks.registry import get_benchmark
    from genenv.runtime.models import load_model_and_tokenizer

    torch.set_num_threads(args.threads)
    model, tok = load_model_and_tokenizer("smollm2", dtype="float32", device="cpu", role="agent")
    model.eval()
    per_channel = {torch.nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig}
    every = torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8)
    layers = copy.deepcopy(model)
    layers.model.layers = torch.ao.quantization.quantize_dynamic(layers.model.layers, per_channel, dtype=torch.qint8)
    tasks = get_benchmark("bamboogle", None).load(split="train")[:args.tasks]
    texts = [tok(tok.apply_chat_template([{"role": "user", "content": t.prompt}], tokenize=False,
                                         add_generation_prompt=True) + str(t.gold), return_tensors="pt").input_ids
             for t in tasks]
    print(f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, {args.threads} threads; decoding "
          f"step at {args.rows} rows x {args.cached} cached tokens; policy change over {len(texts)} questions")
    for name, variant in (("int8-all", every), ("int8-layers", layers)):
        fp32, int8 = [], []
        for _ in range(args.repeats):
            fp32.append(step_seconds(model, args.rows, args.cached))
            int8.append(step_seconds(variant, args.rows, args.cached))
        gap, agree = policy_change(model, variant, texts)
        print(f"{name}: step {statistics.median(fp32):.3f} s float32, {statistics.median(int8):.3f} s int8 "
              f"({statistics.median(fp32) / statistics.median(int8):.2f}x); mean |log-prob gap| {gap:.3f} nats, "
              f"argmax agreement {agree:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
