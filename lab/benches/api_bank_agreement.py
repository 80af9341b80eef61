"""Agreement of our API-Bank verdicts with the released evaluator's, on gold calls and perturbed arguments.

Needs a checkout of the released evaluator (AlibabaResearch/DAMO-ConvAI, folder ``api-bank/``; the study in
``lab/figures/api_bank_agreement.json`` used commit 483554ea). Its code is never imported into this package: it
runs in a child Python process with the checkout as working directory, as its own evaluators run
(``evaluator.py`` for levels 1-2, ``lv3_evaluator.py`` for level 3), with the parts that need a model or the
network stubbed (``sentence_transformers`` for ToolSearcher, ``googletrans``; ToolSearcher, Dictionary, Translate
and the other calls that reach the network are therefore not scored by it).

Cases (`genenv.benchmarks.api_bank.agreement`): every official task of levels 1-3
(`genenv.benchmarks.api_bank.env.load_api_bank_tasks`), its gold call and, for every string or number
argument, the argument padded with spaces (``pad``), upper-cased (``upper``), lower-cased (``lower``), without
spaces (``nospace``), with spaces around operators and commas (``spaced``) and replaced (``wrong``); a variant is
kept when it changes the text. For every argument (lists too), the call without it (``omit``) and with it given as
``''`` (``empty``; written last, where the released parser drops it rather than misreading the next argument). Each
case is written as the benchmark's ``API-Request: [Name(k='v', ...)]`` line. The released side: ``get_api_call`` +
``parse_api_call`` on that text, a fresh ``ToolManager`` (``./apis`` or ``./lv3_apis``), ``api_call``, then the gold
API's ``check_api_call_correctness`` against the recorded result (the exceptions its evaluators catch count as
wrong). Ours: ``genenv/APIBank-v0`` under ``parsing=official`` and ``parsing=lenient``
(`case_reward`).

Figures per level: cases, comparable cases, agreement of each reading, and the same over the ``omit`` / ``empty``
cases alone (``.../omit_or_empty``). A case is *comparable* when the released code scores the unperturbed gold call
of its task correct and parses the case's text into the intended arguments (its regex truncates values with quotes);
agreement is computed over comparable cases. Output: a JSON file with the per-level / per-reading figures, every
disagreement of the official reading (those of the lenient reading counted by variant), the gold calls the released
code does not score correct (with its message), and the released verdict of every comparable case, ``{task_id:
{variant: verdict}}`` (what ``tests/test_api_bank.py`` replays).

Usage:

    git clone https://github.com/AlibabaResearch/DAMO-ConvAI && git -C DAMO-ConvAI checkout 483554ea
    python lab/benches/api_bank_agreement.py --official DAMO-ConvAI/api-bank \\
        --out lab/figures/api_bank_agreement.json
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from genenv.benchmarks.api_bank.agreement import (ARGUMENT_CASES, argument_text, case_call, case_reward, case_text,
                                                   cases)
from genenv.benchmarks.api_bank.apis.catalogue import dialogue
from genenv.benchmarks.api_bank.data import api_bank_dir
from genenv.benchmarks.api_bank.env import load_api_bank_tasks
from genenv.envs.data import read_json
from genenv.envs.task import Task

READINGS = ("official", "lenient")


def intended_parse(task: Task, variant: str) -> dict[str, str]:
    """The arguments the released parser should read from the case's text, as text: the case's arguments with
    an empty one left out (its value pattern needs one character or more)."""
    return {k: argument_text(v).strip("'\"") if not isinstance(v, (list, dict)) else repr(v)
            for k, v in case_call(task, variant).arguments.items() if v != ""}


def recorded_result(root: Path, task: Task) -> dict[str, Any]:
    """The result recorded in the data for the task's gold call (what the released evaluators compare with)."""
    source, level = task.metadata["source"], task.metadata["level"]
    if level == 3:
        call = read_json(root / "test-data" / "level-3.json")[source["sample_id"]]["apis"][source["api_id"]]
        return call["output"]
    turns = [t for t in dialogue(root, level, source["file"]) if t.get("role") == "API"]
    k = len(task.metadata["replay"])
    return {**turns[k]["result"], "api_name": turns[k]["api_name"]}


_CHILD = r'''
import json, sys, types, copy
for name in ("sentence_transformers", "googletrans"):
    stub = types.ModuleType(name)
    class _Unavailable:
        def __init__(self, *a, _name=name, **k):
            raise RuntimeError(_name + " is stubbed: no model or network in this study")
    stub.SentenceTransformer = stub.Translator = _Unavailable
    stub.util = types.SimpleNamespace()
    sys.modules[name] = stub
sys.path.insert(0, ".")
from tool_manager import ToolManager
from api_call_extraction import parse_api_call, get_api_call
rows = json.load(open(sys.argv[1]))
out = []


def offline(exc):
    """A failure of the stubs or of the network, not a verdict of the released code."""
    text = str(exc)
    return ("stubbed" in text or "HTTPSConnectionPool" in text or "Max retries" in text
            or type(exc).__module__.startswith(("requests", "urllib3")))


for row in rows:
    level, gold = row["level"], row["gold"]
    verdict, note, parsed = None, "", None
    try:
        name, parsed = parse_api_call(get_api_call(row["text"]))
    except Exception as exc:
        out.append({"verdict": None, "note": "parser crashed: " + repr(exc)[:200], "parsed": None})
        continue
    if name != gold["api_name"]:
        out.append({"verdict": False, "note": "API name mismatch", "parsed": parsed})
        continue
    manager = ToolManager("./lv3_apis" if level == 3 else "./apis")
    try:
        result = manager.api_call(name, **parsed)
    except Exception as exc:
        caught = level != 3 or isinstance(exc, (TypeError, AssertionError)) or str(exc) == "invalid tool name."
        verdict = None if offline(exc) or not caught else False
        out.append({"verdict": verdict, "note": "api_call: " + repr(exc)[:200], "parsed": parsed})
        continue
    if result.get("exception") and offline(result["exception"]):
        out.append({"verdict": None, "note": "needs a model or the network: " + str(result["exception"])[:120],
                    "parsed": parsed})
        continue
    try:
        verdict = bool(manager.init_tool(gold["api_name"]).check_api_call_correctness(
            copy.deepcopy(result), copy.deepcopy(gold)))
    except KeyError as exc:
        verdict, note = False, "checker: " + repr(exc)[:200]
    except AssertionError as exc:
        verdict, note = (False if level == 3 else None), "checker: " + repr(exc)[:200]
    except Exception as exc:
        verdict, note = None, "checker crashed: " + repr(exc)[:200]
    out.append({"verdict": verdict, "note": note, "parsed": parsed})
json.dump(out, open(sys.argv[2], "w"))
'''


def released_verdicts(official: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run the released evaluator's parse, execution and checker on ``rows`` in a child process."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst, child = Path(tmp, "in.json"), Path(tmp, "out.json"), Path(tmp, "child.py")
        src.write_text(json.dumps(rows))
        child.write_text(_CHILD)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        subprocess.run([sys.executable, str(child), str(src), str(dst)], cwd=official, check=True, env=env,
                       stdout=subprocess.DEVNULL)
        return json.loads(dst.read_text())


def unscored_cause(task: Task, released: dict[str, Any]) -> str:
    """Why the released code does not score a gold call correct, from its message and the call (first that
    applies): needs a model or the network (stubbed here), a checker crash, a list argument (the released parser
    passes it on as text), earlier calls of the dialogue (not replayed there), else its own backend does not
    reproduce the recording."""
    note = released.get("note") or ""
    if note.startswith("needs a model") or "stubbed" in note:
        return "needs a model or the network"
    if note.startswith(("checker", "api_call")):
        return f"released code raises ({note.split(':', 1)[0]})"
    if any(isinstance(v, (list, dict)) for v in (task.gold.get("arguments") or {}).values()):
        return "a list argument reaches the API as text"
    if task.metadata.get("replay"):
        return "earlier calls of the dialogue are not replayed"
    return "the released backend's result differs from the recorded one"


def study(official: Path, data_dir: str | None = None) -> dict[str, Any]:
    """The agreement study (see the module docstring): summary, disagreements and per-case rows."""
    root = api_bank_dir(data_dir)
    all_cases = [c for level in (1, 2, 3) for c in cases(load_api_bank_tasks(level, "official", data_dir=data_dir))]
    rows = [{"level": t.metadata["level"], "text": case_text(t, v), "gold": recorded_result(root, t)}
            for t, v in all_cases]
    released = released_verdicts(official, rows)
    gold_ok = {t.id: r["verdict"] is True for (t, v), r in zip(all_cases, released) if v == "gold"}
    unscorable = [{"task_id": t.id, "api": t.gold["name"], "released": r["verdict"], "released_note": r["note"],
                   "cause": unscored_cause(t, r)}
                  for (t, v), r in zip(all_cases, released) if v == "gold" and r["verdict"] is not True]
    summary: dict[str, Any] = collections.defaultdict(lambda: collections.Counter())
    disagreements: list[dict[str, Any]] = []
    per_case: dict[str, dict[str, bool]] = collections.defaultdict(dict)
    for (task, variant), row, rel in zip(all_cases, rows, released):
        intended = intended_parse(task, variant)
        parsed_ok = rel["parsed"] is not None and {k: str(v) for k, v in rel["parsed"].items()} == intended
        comparable = gold_ok[task.id] and rel["verdict"] is not None and parsed_ok
        if comparable:
            per_case[task.id][variant] = rel["verdict"]
        level = f"level-{task.metadata['level']}"
        summary[level]["cases"] += 1
        if not comparable:
            why = ("released code cannot score the gold call" if not gold_ok[task.id] else
                   "released parser changes the text" if not parsed_ok else "released code cannot score the case")
            summary[level][f"not comparable: {why}"] += 1
            continue
        summary[level]["comparable"] += 1
        left_out = variant.split(":")[0] in ARGUMENT_CASES
        summary[level]["comparable/omit_or_empty"] += left_out
        for reading in READINGS:
            mine = case_reward(task, row["text"], reading) == 1.0
            if mine == rel["verdict"]:
                summary[level][f"agree/{reading}"] += 1
                summary[level][f"agree/{reading}/omit_or_empty"] += left_out
            else:
                disagreements.append({"task_id": task.id, "variant": variant, "reading": reading, "ours": mine,
                                      "released": rel["verdict"], "released_note": rel["note"], "text": row["text"]})
    figures = {}
    for level, counts in sorted(summary.items()):
        n, m = counts["comparable"], counts["comparable/omit_or_empty"]
        figures[level] = {**dict(counts), **{f"agreement/{r}": round(counts[f"agree/{r}"] / n, 4) if n else None
                                             for r in READINGS},
                          **{f"agreement/{r}/omit_or_empty": round(counts[f"agree/{r}/omit_or_empty"] / m, 4)
                             if m else None for r in READINGS}}
    lenient = [d for d in disagreements if d["reading"] == "lenient"]
    return {"released": "AlibabaResearch/DAMO-ConvAI api-bank (commit 483554ea)", "figures": figures,
            "disagreements": [d for d in disagreements if d["reading"] == "official"],
            "lenient_disagreements": {"by_variant": dict(collections.Counter(d["variant"].split(":")[0]
                                                                             for d in lenient)),
                                      "examples": lenient[:5]},
            "gold_not_scored_by_released": unscorable, "cases": per_case}


def main(argv: list[str] | None = None) -> None:
    """Command line: ``--official DIR`` (the released ``api-bank`` folder), ``--out FILE``, ``--data-dir``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--official", required=True, type=Path)
    parser.add_argument("--out", type=Path, default=Path("lab/figures/api_bank_agreement.json"))
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    result = study(args.official.resolve(), args.data_dir)
    args.out.write_text(json.dumps(result, indent=None, separators=(",", ":")) + "\n")
    print(json.dumps(result["figures"], indent=2))
    print("official disagreements:", len(result["disagreements"]),
          "lenient disagreements by variant:", result["lenient_disagreements"]["by_variant"])


if __name__ == "__main__":
    main()
