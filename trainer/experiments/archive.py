"""Finished experiments as compressed archives: the shipped runs live in ``results/<experiment>.tar.xz``, their
reports in ``docs/curriculum/<experiment>/``.

**Archive format.** An xz-compressed POSIX (PAX) tar of one experiment folder: every file under it except its
report (`REPORT_FILES`, at any depth), stored as ``<experiment>/<relative path>`` (``twx_informative/genenv/
seed0/metrics.jsonl``, ``twx_levers/warm/source/experiment.yaml``, ...). Members are regular files only, sorted by
path, with mtime 0, uid and gid 0, no owner names and mode 0644, so packing the same files again gives the same
bytes (`pack`).

**Checksums.** ``SHA256SUMS`` beside the archives: one line per archive, ``<sha256 hex>  <archive file name>``, the
format of coreutils' ``sha256sum`` (``cd results && sha256sum -c SHA256SUMS`` checks them outside Python).
`verify` checks an archive against its line before anything reads it.

**Addresses.** A folder of runs is named either by a path on disk or by ``ARCHIVE[:SUBFOLDER]``:
``results/twx_informative.tar.xz`` is the experiment, ``results/twx_informative.tar.xz:genenv`` its ``genenv`` arm,
``results/twx_levers.tar.xz:warm/source`` a nested experiment (`experiment_folder`). An archive is unpacked on
demand, once per checksum, into a cache folder (default ``<archive folder>/.unpacked/``; `unpack`).
"""
from __future__ import annotations

import argparse
import hashlib
import io
import lzma
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

__all__ = [
    "ArchiveError", "DONE_FILE", "REPORT_FILES", "SUMS", "archived_files", "cli", "experiment_folder", "pack",
    "read_sums", "sha256", "unpack", "verify",
]

SUFFIX = ".tar.xz"
SUMS = "SHA256SUMS"  # the checksum file beside the archives
DONE_FILE = "done.json"  # a finished run's marker in its run directory (written by run.finish_arm)
REPORT_FILES = ("summary.md", "summary.json", "curves.png", "alignment.png")  # kept in docs, never archived
CACHE = ".unpacked"  # default unpack cache, a folder beside the archives


class ArchiveError(ValueError):
    """An archive that must not be read: no checksum recorded for it, a checksum mismatch (a corrupted or replaced
    file), a member outside its experiment folder, or an address that names no folder inside it."""


def sha256(path: Path) -> str:
    """SHA-256 (hex) of the file at ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_sums(folder: Path) -> dict[str, str]:
    """``{archive file name: sha256 hex}`` of ``<folder>/SHA256SUMS`` (``{}`` when it does not exist).

    Raises:
        ArchiveError: a line that is not ``<64 hex digits>  <name>``.
    """
    path = Path(folder) / SUMS
    if not path.is_file():
        return {}
    out = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64 or not name or any(c not in "0123456789abcdef" for c in digest):
            raise ArchiveError(f"{path}: line {n} is not '<sha256 hex>  <file name>': {line!r}")
        out[name] = digest
    return out


def _write_sums(folder: Path, sums: dict[str, str]) -> None:
    (Path(folder) / SUMS).write_text("".join(f"{sums[k]}  {k}\n" for k in sorted(sums)), encoding="utf-8")


def archived_files(folder: Path, finished_only: bool = False) -> list[Path]:
    """The files of experiment ``folder`` that an archive holds: every regular file under it but the reports
    (`REPORT_FILES`), sorted by their path relative to ``folder``.

    With ``finished_only`` (an experiment still running, shipped as its runs finish): the experiment's own files
    but its logs (``*.log``, still being written), and the files of each finished run (a folder holding a
    ``done.json``) but its ``checkpoints/``; a run without ``done.json`` (unfinished, or stopped) gives nothing."""
    folder = Path(folder)
    files = [p for p in folder.rglob("*") if p.is_file() and not p.is_symlink() and p.name not in REPORT_FILES]
    if finished_only:
        runs = {p.parent.relative_to(folder).parts for p in files if p.name == DONE_FILE}
        files = [p for p in files if _finished_member(p.relative_to(folder).parts, runs)]
    return sorted(files, key=lambda p: p.relative_to(folder).as_posix())


def _finished_member(parts: tuple[str, ...], runs: set[tuple[str, ...]]) -> bool:
    if len(parts) == 1:
        return not parts[0].endswith(".log")
    depth = next((d for d in range(1, len(parts)) if parts[:d] in runs), None)  # the nearest finished run above
    return depth is not None and parts[depth] != "checkpoints"


def pack(folder: Path, out_dir: Path, finished_only: bool = False) -> Path:
    """Write ``<out_dir>/<folder name>.tar.xz`` from the experiment ``folder`` (see the module docstring: its files
    but the reports, deterministic) and record its checksum in ``<out_dir>/SHA256SUMS`` (an existing line for the
    same archive is replaced). Returns the archive's path. ``finished_only``: only its finished runs, without
    checkpoints, and its own files but logs (`archived_files`): an experiment that is still running, shipped as each
    run finishes.

    Raises:
        FileNotFoundError: ``folder`` is not a folder, or holds no file to archive.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such experiment folder")
    files = archived_files(folder, finished_only)
    if not files:
        raise FileNotFoundError(f"{folder}: no run file to archive (only reports, or nothing)")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in files:
            info = tarfile.TarInfo(f"{folder.name}/{path.relative_to(folder).as_posix()}")
            data = path.read_bytes()
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    archive = out_dir / f"{folder.name}{SUFFIX}"
    tmp = archive.with_name(archive.name + ".tmp")
    tmp.write_bytes(lzma.compress(raw.getvalue(), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=9))
    os.replace(tmp, archive)
    _write_sums(out_dir, {**read_sums(out_dir), archive.name: sha256(archive)})
    return archive


def verify(archive: Path) -> str:
    """Check ``archive`` against its line in the ``SHA256SUMS`` beside it; returns its SHA-256 (hex).

    Raises:
        FileNotFoundError: no such archive.
        ArchiveError: no checksum recorded for it, or its checksum differs from the recorded one.
    """
    archive = Path(archive)
    if not archive.is_file():
        raise FileNotFoundError(f"{archive}: no such archive")
    want = read_sums(archive.parent).get(archive.name)
    if want is None:
        raise ArchiveError(f"{archive}: no checksum recorded in {archive.parent / SUMS}; refusing to read it")
    got = sha256(archive)
    if got != want:
        raise ArchiveError(f"{archive}: checksum mismatch (SHA-256 {got}, {archive.parent / SUMS} records {want}): "
                           "the archive is corrupted or was replaced; refusing to read it")
    return got


def unpack(archive: Path, cache: Path | None = None) -> Path:
    """Verify ``archive`` (`verify`), extract it once per checksum into ``<cache>/<sha256>/`` and return its
    experiment folder, ``<cache>/<sha256>/<experiment>`` (a later call with the same archive reuses it; an archive
    with other bytes gets its own folder).

    Args:
        cache: the cache folder; ``None``: ``<archive folder>/.unpacked``.
    Raises:
        FileNotFoundError: no such archive.
        ArchiveError: see `verify`; a member outside ``<experiment>/`` or not a regular file or folder.
    """
    archive = Path(archive)
    digest = verify(archive)
    name = archive.name[: -len(SUFFIX)] if archive.name.endswith(SUFFIX) else archive.stem
    cached = Path(cache if cache is not None else archive.parent / CACHE) / digest
    if not cached.is_dir():
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{digest}.", dir=cached.parent))
        try:
            _extract(archive, name, tmp)
            try:
                os.replace(tmp, cached)  # atomic: a concurrent reader sees the whole folder or none
            except OSError:
                if not cached.is_dir():  # else another process unpacked the same bytes first
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return cached / name


def _extract(archive: Path, name: str, dest: Path) -> None:
    with tarfile.open(archive, mode="r:xz") as tar:
        for member in tar.getmembers():
            inside = member.name == name or member.name.startswith(f"{name}/")
            if not inside or ".." in Path(member.name).parts or not (member.isfile() or member.isdir()):
                raise ArchiveError(f"{archive}: member {member.name!r} is not a file or folder under {name}/")
        tar.extractall(dest, filter="data")


def experiment_folder(address: str | Path, cache: Path | None = None) -> Path:
    """The folder on disk that ``address`` names: a path to a folder as it is, or ``ARCHIVE[:SUBFOLDER]`` (an archive
    path ending in ``.tar.xz``, optionally followed by ``:`` and a folder inside its experiment) unpacked with
    `unpack` (into ``cache``, default ``<archive folder>/.unpacked``).

    Raises:
        FileNotFoundError: no such folder or archive.
        ArchiveError: see `unpack`; ``SUBFOLDER`` is not a folder of the archive's experiment.
    """
    text = str(address)
    head, sep, sub = text.partition(SUFFIX + ":")
    path = Path(head + SUFFIX) if sep else Path(text)
    if not path.name.endswith(SUFFIX):
        if not path.is_dir():
            raise FileNotFoundError(f"{path}: no such folder (or give an archive, <name>{SUFFIX}[:<subfolder>])")
        return path
    root = unpack(path, cache)
    folder = root / sub if sub else root
    if sub and (Path(sub).is_absolute() or ".." in Path(sub).parts or not folder.is_dir()):
        kids = sorted(p.name for p in root.iterdir() if p.is_dir())
        raise ArchiveError(f"{path}: no folder {sub!r} in {root.name}/ (its folders: {', '.join(kids)})")
    return folder


def cli(argv) -> int:
    """``genenv-experiment archive EXPERIMENT [--out DIR] [--finished-only]``: `pack` the experiment folder into
    ``<DIR>/<experiment>.tar.xz`` (default ``results``) with its line in ``<DIR>/SHA256SUMS`` and print the archive's
    path and SHA-256; ``--finished-only`` ships a running experiment's finished runs (`archived_files`). Exit 2 with
    a message when the folder is missing or holds nothing to archive."""
    ap = argparse.ArgumentParser(prog="genenv-experiment archive",
                                 description="pack an experiment folder into a checksummed, deterministic archive")
    ap.add_argument("experiment", type=Path, help="the experiment folder, e.g. experiments/twx_headroom")
    ap.add_argument("--out", type=Path, default=Path("results"), help="where the archive goes (default: results)")
    ap.add_argument("--finished-only", action="store_true",
                    help="only finished runs (done.json), without checkpoints or logs: ship a running experiment")
    args = ap.parse_args(list(argv))
    try:
        archive = pack(args.experiment, args.out, args.finished_only)
    except FileNotFoundError as e:
        print(f"genenv-experiment archive: {e}", file=sys.stderr)
        return 2
    print(f"{archive}  sha256 {sha256(archive)}")
    return 0
