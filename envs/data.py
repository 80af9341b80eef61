"""Locating and reading benchmark data files.

The data directory holds one folder per benchmark (``bfcl/``, ``bamboogle/``, ...) in the layout described by
``shared/data/SOURCES.md``. It is resolved in this order:

1. an explicit ``data_dir`` argument (from a config or a command-line flag);
2. the ``GENENV_DATA_DIR`` environment variable;
3. otherwise the small real sample that each benchmark folder ships (``benchmarks/<name>/sample/``, the same
   layout as ``<data_dir>/<name>/``), so that a fresh clone runs.

A benchmark reads its folder with `benchmark_dir`: ``<data_dir>/<name>/``, or its packaged sample when no data
directory is set or the data directory has no ``<name>/`` (a benchmark from another package, whose data the shared
folder never holds). `folders_read` says which folder each benchmark read, for the result files. Every reader
raises `DataError` naming the file, the record and what to do, never a bare ``KeyError``.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Iterable, Iterator

__all__ = [
    "DataError", "benchmark_dir", "benchmark_file", "cache_dir", "data_label", "folders_read", "is_packaged",
    "iter_jsonl", "jsonl_line", "read_json", "require_fields", "resolve_data_dir", "split_of", "write_json", "write_jsonl",
]

log = logging.getLogger(__name__)

ENV_VAR = "GENENV_DATA_DIR"
PACKAGED = "packaged samples"  # how results name the data when no data directory is set
_FOLDERS_READ: dict[str, str] = {}  # data folder name → the folder `benchmark_dir` last resolved it to


class DataError(RuntimeError):
    """A benchmark data file is missing or malformed. The message names the file, the record and a remedy."""


def cache_dir() -> Path:
    """Where genenv caches derived files (converted models, ALFWorld game records): ``$GENENV_CACHE``, else
    ``~/.cache/genenv``. Everything in it can be deleted; it is rebuilt on use."""
    return Path(os.environ.get("GENENV_CACHE", Path.home() / ".cache" / "genenv"))


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path | None:
    """The data directory to read: ``data_dir``, else ``$GENENV_DATA_DIR``, else ``None`` (the packaged samples).

    Raises:
        DataError: an explicitly given directory (argument or environment variable) does not exist.
    """
    for source, value in (("data_dir argument", data_dir), (ENV_VAR, os.environ.get(ENV_VAR))):
        if value:
            path = Path(value).expanduser()
            if not path.is_dir():
                raise DataError(
                    f"{source} points to {path}, which is not a directory. Set it to the folder that holds "
                    f"bfcl/, bamboogle/, ... (e.g. shared/data), or unset it to use the packaged samples."
                )
            return path
    return None


def is_packaged(data_dir: str | os.PathLike | None = None) -> bool:
    """True when ``data_dir`` resolves to the packaged samples (results are then a sample, not the full split)."""
    return resolve_data_dir(data_dir) is None


def data_label(data_dir: str | os.PathLike | None = None) -> str:
    """The resolved data directory as text for result files, or `PACKAGED`."""
    root = resolve_data_dir(data_dir)
    return str(root) if root is not None else PACKAGED


def benchmark_dir(benchmark: str, data_dir: str | os.PathLike | None, sample: Path) -> Path:
    """The folder a benchmark reads, in this order:

    1. ``<data dir>/<benchmark>`` when a data directory is set (`resolve_data_dir`) and holds that folder;
    2. the benchmark's packaged ``sample`` folder when no data directory is set, or when the data directory has no
       ``<benchmark>/`` but the sample exists (logged as a warning; a benchmark shipped in another package is read
       from its own sample whatever ``GENENV_DATA_DIR`` says);
    3. otherwise ``<data dir>/<benchmark>``, so that `benchmark_file` reports the missing file there.

    The choice is recorded for `folders_read`.

    Raises:
        DataError: an explicitly set data directory does not exist.
    """
    root = resolve_data_dir(data_dir)
    sample = Path(sample)
    folder = sample if root is None else root / benchmark
    if root is not None and not folder.is_dir() and sample.is_dir():
        if _FOLDERS_READ.get(benchmark) != str(sample):  # once per folder and process
            log.warning("the data directory %s has no %s/ folder: reading the packaged sample %s", root, benchmark,
                        sample)
        folder = sample
    _FOLDERS_READ[benchmark] = str(folder)
    return folder


def folders_read() -> dict[str, str]:
    """Data folder name → the folder `benchmark_dir` resolved it to last in this process (a copy; what the
    result files record as ``data_folders``, beside the data directory of `data_label`)."""
    return dict(_FOLDERS_READ)


def benchmark_file(folder: Path, *parts: str) -> Path:
    """Path of a data file under ``folder`` (usually a `benchmark_dir`); raises `DataError` naming
    the expected path if it is missing."""
    path = Path(folder, *parts)
    if not path.is_file():
        raise DataError(
            f"missing data file {path}. Point GENENV_DATA_DIR (or data_dir) at the full data folder "
            f"described in shared/data/SOURCES.md, or unset it to use the packaged samples."
        )
    return path


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, record)`` for each non-empty line of a JSON Lines file (1-based line numbers).

    Raises:
        DataError: a line is not valid JSON or not a JSON object (names file and line).
    """
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}: line {lineno} is not valid JSON ({exc}); re-copy the file.") from exc
            if not isinstance(record, dict):
                raise DataError(f"{path}: line {lineno} is a {type(record).__name__}, expected a JSON object.")
            yield lineno, record


def jsonl_line(record: Any) -> str:
    """One JSON Lines record: ``record`` as JSON (UTF-8 kept, values JSON cannot hold written as ``str``) plus a
    newline; the format of every results file the project writes (``tasks.jsonl``, per-setting rows)."""
    return json.dumps(record, ensure_ascii=False, default=str) + "\n"


def write_jsonl(path: Path, records: Iterable[Any]) -> None:
    """Write ``records`` to ``path`` as JSON Lines (`jsonl_line`) through a temporary file, so a kill leaves
    the old file or the new one, never half of one."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(jsonl_line(r) for r in records), encoding="utf-8")
    tmp.replace(path)


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` as indented JSON (``indent=1``; values JSON cannot hold written as ``str``),
    creating its folder, through a temporary file like `write_jsonl`: the summary file of every benchmark
    script (``bench_rollout.json``, ``bench_endpoint.json``, ``parsing.json``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    tmp.replace(path)


def read_json(path: Path) -> Any:
    """Read a whole JSON file; raises `DataError` naming the file on a syntax error."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} is not valid JSON ({exc}); re-copy the file.") from exc


def require_fields(record: dict[str, Any], fields: tuple[str, ...], where: str) -> None:
    """Raise `DataError` if ``record`` lacks any of ``fields``; ``where`` names file and record."""
    missing = [f for f in fields if f not in record]
    if missing:
        raise DataError(f"{where}: missing field(s) {missing}; the file does not have the documented layout.")


def split_of(task_id: str) -> str:
    """Deterministic co-evolution split of a task id (BFCL, API-Bank): ``"heldout"`` for 20 % of ids (sha1
    bucket), else ``"train"``."""
    bucket = int(hashlib.sha1(task_id.encode()).hexdigest(), 16) % 10
    return "heldout" if bucket < 2 else "train"
