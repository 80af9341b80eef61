"""``genenv-envs``: list the registered environments with their splits and sizes, export tasks as veRL parquet,
rebuild the packaged samples.

Usage::

    genenv-envs                       # table of env id, options (category/split) and task counts
    genenv-envs --data-dir DIR        # the same for another data directory
    genenv-envs export --benchmark bamboogle --split train --out train.parquet   # veRL RL data file
    genenv-envs build-samples --source shared/data   # (maintainers) refresh envs/samples from the full data
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from genenv.envs.data import DataError, packaged_samples_dir, resolve_data_dir
from genenv.envs.registry import ENVS, env_entry

SAMPLE_PER_BFCL_CATEGORY = 12
SAMPLE_SIZES = {"simple_python": 50}  # the default training / evaluation category gets a larger sample


def list_envs(data_dir: str | None = None) -> list[dict]:
    """One row per (env, options): ``env_id``, ``benchmark``, ``options`` and ``tasks`` (count, or the error)."""
    rows = []
    for entry in ENVS.values():
        for options in entry.split_options:
            try:
                n = len(entry.env_class.load_tasks(data_dir=data_dir, **options))
            except (DataError, ValueError) as exc:
                n = f"error: {exc}"
            rows.append({"env_id": entry.env_id, "benchmark": entry.benchmark, "options": options, "tasks": n})
    return rows


def build_samples(source: Path, dest: Path = None) -> None:
    """Copy a small real sample of each benchmark from ``source`` (full data dir) into the package.

    BFCL: the first :data:`SAMPLE_PER_BFCL_CATEGORY` entries of every single-turn and multi-turn category (50
    of simple_python) and their answers;
    Bamboogle: all 125 questions (39 KB); API-Bank: see :func:`genenv.envs.api_bank.build_sample`;
    ALFWorld: see :func:`genenv.envs.alfworld.build_sample`; TravelPlanner: see
    :func:`genenv.envs.travelplanner.build_sample`; baselines: the paper's Table 1.
    """
    from genenv.envs.alfworld import build_sample as build_alfworld_sample
    from genenv.envs.api_bank import build_sample as build_api_bank_sample
    from genenv.envs.travelplanner import build_sample as build_travelplanner_sample
    from genenv.envs.bfcl import NO_ANSWER_CATEGORIES, SINGLE_TURN_CATEGORIES
    from genenv.envs.bfcl_multi_turn import MULTI_TURN_CATEGORIES

    dest = dest or packaged_samples_dir()
    (dest / "bfcl" / "possible_answer").mkdir(parents=True, exist_ok=True)
    for cat in SINGLE_TURN_CATEGORIES + MULTI_TURN_CATEGORIES:
        name = f"BFCL_v4_{cat}.json"
        size = SAMPLE_SIZES.get(cat, SAMPLE_PER_BFCL_CATEGORY)
        lines = (source / "bfcl" / name).read_text(encoding="utf-8").splitlines()[:size]
        (dest / "bfcl" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        if cat not in NO_ANSWER_CATEGORIES:
            ids = {json.loads(line)["id"] for line in lines}
            answers = [a for a in (source / "bfcl" / "possible_answer" / name).read_text(encoding="utf-8").splitlines()
                       if a.strip() and json.loads(a)["id"] in ids]
            (dest / "bfcl" / "possible_answer" / name).write_text("\n".join(answers) + "\n", encoding="utf-8")
    for sub, name in (("bamboogle", "test.jsonl"), ("baselines", "genenv_table1.csv"), ("baselines", "README.md")):
        (dest / sub).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / sub / name, dest / sub / name)
    build_api_bank_sample(source, dest)
    build_alfworld_sample(source, dest)
    build_travelplanner_sample(source, dest)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``genenv-envs``."""
    parser = argparse.ArgumentParser(prog="genenv-envs", description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", default="list", choices=["list", "export", "build-samples"])
    parser.add_argument("--benchmark", default=None, help="export: registry name")
    parser.add_argument("--split", default="train", help="export: split (default train)")
    parser.add_argument("--out", default=None, help="export: parquet file to write")
    parser.add_argument("--data-dir", default=None, help="data directory (default: $GENENV_DATA_DIR or samples)")
    parser.add_argument("--source", default=None, help="build-samples: the full data directory")
    parser.add_argument("--json", action="store_true", help="list: print JSON instead of a table")
    args = parser.parse_args(argv)
    if args.command == "build-samples":
        if not args.source:
            parser.error("build-samples needs --source")
        build_samples(Path(args.source))
        print(f"samples written to {packaged_samples_dir()}")
        return 0
    if args.command == "export":
        if not (args.benchmark and args.out):
            parser.error("export needs --benchmark and --out")
        from genenv.envs.task import write_verl_parquet

        tasks = env_entry(args.benchmark).env_class.load_tasks(split=args.split, data_dir=args.data_dir)
        write_verl_parquet(tasks, args.out)
        print(f"{len(tasks)} {args.benchmark} {args.split} tasks written to {args.out} (veRL parquet)")
        return 0
    rows = list_envs(args.data_dir)
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        return 0
    print(f"data: {resolve_data_dir(args.data_dir)}")
    opts = [" ".join(f"{k}={v}" for k, v in r["options"].items()) for r in rows]
    w_id, w_opt = max(len(r["env_id"]) for r in rows), max(len(o) for o in opts)
    print(f"{'env id':{w_id}} {'options':{w_opt}} tasks")
    for r, o in zip(rows, opts):
        print(f"{r['env_id']:{w_id}} {o:{w_opt}} {r['tasks']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
