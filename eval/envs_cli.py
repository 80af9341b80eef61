"""``genenv-envs``: list the registered environments with their splits and sizes, export tasks as veRL parquet,
rebuild the packaged samples.

Usage:

    genenv-envs                       # table of env id, options (category/split) and task counts
    genenv-envs --data-dir DIR        # the same for another data directory
    genenv-envs export --benchmark bamboogle --split train --out train.parquet   # veRL RL data file
    genenv-envs build-samples --source shared/data   # (maintainers) refresh the packaged samples from the full data
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from genenv.envs.data import DataError, data_label
from genenv.envs.registry import SAMPLE_BUILDERS, env_entry, load_plugins, plugin_failures
from genenv.envs.tables import load_object
from genenv.eval.baselines import build_sample as build_baselines_sample

__all__ = ["main"]

def list_envs(data_dir: str | None = None) -> list[dict]:
    """One row per (env, options): ``env_id``, ``benchmark``, ``options`` and ``tasks`` (count, or the error)."""
    rows = []
    for entry in load_plugins().values():
        for options in entry.split_options:
            try:
                n = len(entry.env_class.load_tasks(data_dir=data_dir, **options))
            except (DataError, ValueError) as exc:
                n = f"error: {exc}"
            rows.append({"env_id": entry.env_id, "benchmark": entry.benchmark, "options": options, "tasks": n})
    return rows


def build_samples(source: Path) -> list[str]:
    """Rebuild every packaged sample from the full data dir ``source``: each registered sample builder
    (`SAMPLE_BUILDERS`, one per benchmark folder) writes its folder's ``sample/``, and
    the paper's Table 1 is copied into ``eval/baselines/``. Returns the folders rebuilt."""
    load_plugins()
    for folder, entry_point in sorted(SAMPLE_BUILDERS.items()):
        load_object(entry_point)(Path(source))
    build_baselines_sample(Path(source))
    return sorted(SAMPLE_BUILDERS) + ["baselines"]


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``genenv-envs``. ``list`` exits 1, naming each one on stderr, when a benchmark entry point
    failed to import (`genenv.envs.registry.plugin_failure` says why, a shadowing folder included)."""
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
        folders = build_samples(Path(args.source))
        print(f"packaged samples rebuilt: {', '.join(folders)}")
        return 0
    if args.command == "export":
        if not (args.benchmark and args.out):
            parser.error("export needs --benchmark and --out")
        from genenv.envs.verl_rows import write_verl_parquet

        tasks = env_entry(args.benchmark).env_class.load_tasks(split=args.split, data_dir=args.data_dir)
        write_verl_parquet(tasks, args.out)
        print(f"{len(tasks)} {args.benchmark} {args.split} tasks written to {args.out} (veRL parquet)")
        return 0
    rows = list_envs(args.data_dir)
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        return 1 if plugin_failures() else 0
    print(f"data: {data_label(args.data_dir)}")
    opts = [" ".join(f"{k}={v}" for k, v in r["options"].items()) for r in rows]
    w_id, w_opt = max([6, *(len(r["env_id"]) for r in rows)]), max([7, *map(len, opts)])
    print(f"{'env id':{w_id}} {'options':{w_opt}} tasks")
    for r, o in zip(rows, opts):
        print(f"{r['env_id']:{w_id}} {o:{w_opt}} {r['tasks']}")
    failures = plugin_failures()
    for line in failures:
        print(f"genenv-envs: {line}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
