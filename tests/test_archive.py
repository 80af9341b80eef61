"""The shipped experiment archives (``results/*.tar.xz``, ``trainer/experiments/archive.py``): checksums verified
before anything is read, deterministic packing, ``genenv-experiment report`` on an archive."""
from __future__ import annotations

import io
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from genenv.trainer.experiments.archive import (SUMS, ArchiveError, experiment_folder, pack, read_sums, sha256,
                                                unpack, verify)

ROOT = Path(__file__).resolve().parents[1]
ARCHIVES, REPORTS = ROOT / "results", ROOT / "docs" / "curriculum"


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "genenv.trainer.experiments.run", *map(str, args)],
                          capture_output=True, text=True)


def test_every_archive_has_its_checksum_and_every_report_its_runs():
    """``SHA256SUMS`` names exactly the archives in ``results/`` and each matches; every report folder in
    ``docs/curriculum`` is an experiment of one archive (``<experiment>/<subfolder>`` = ``<experiment>.tar.xz``)."""
    archives = sorted(p.name for p in ARCHIVES.glob("*.tar.xz"))
    assert archives and sorted(read_sums(ARCHIVES)) == archives
    for name in archives:
        verify(ARCHIVES / name)
    tops = {p.relative_to(REPORTS).parts[0] for p in REPORTS.rglob("summary.md")}
    assert {f"{t}.tar.xz" for t in tops} <= set(archives)


def test_a_corrupted_archive_is_refused_before_anything_is_read(tmp_path):
    """One flipped byte: `unpack`, `experiment_folder` and ``genenv-experiment report`` refuse the archive
    with a checksum mismatch and unpack nothing; an archive without a recorded checksum is refused too."""
    archive = tmp_path / "twx_env_policy_rwr.tar.xz"
    data = bytearray((ARCHIVES / archive.name).read_bytes())
    (tmp_path / SUMS).write_text(f"{sha256(ARCHIVES / archive.name)}  {archive.name}\n")
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    with pytest.raises(ArchiveError, match="checksum mismatch"):
        unpack(archive, tmp_path / "cache")
    with pytest.raises(ArchiveError, match="checksum mismatch"):
        experiment_folder(f"{archive}:genenv", tmp_path / "cache")
    out = _cli("report", archive, "--cache", tmp_path / "cache")
    assert out.returncode == 2 and "checksum mismatch" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "cache").exists()
    (tmp_path / SUMS).write_text("")
    with pytest.raises(ArchiveError, match="no checksum recorded"):
        unpack(archive, tmp_path / "cache")
    with pytest.raises(FileNotFoundError, match="no such archive"):
        unpack(tmp_path / "none.tar.xz")


def test_packing_is_deterministic_and_gives_the_shipped_archive(tmp_path, shipped):
    """Packing the same files twice (other mtimes and modes) gives the same bytes, the reports left out; repacking
    a shipped archive's files gives its tar stream again."""
    folder = tmp_path / "twx_env_policy_rwr"
    shutil.copytree(shipped("twx_env_policy_rwr"), folder)
    first = pack(folder, tmp_path / "a")
    for p in folder.rglob("*"):
        os.utime(p, (1e9, 1e9))
    (folder / "summary.md").write_text("a report is not archived\n")
    os.chmod(folder / "experiment.yaml", 0o600)
    second = pack(folder, tmp_path / "b")
    assert first.read_bytes() == second.read_bytes()
    assert read_sums(tmp_path / "a") == {first.name: sha256(first)}
    assert lzma.decompress(first.read_bytes()) == lzma.decompress((ARCHIVES / first.name).read_bytes())
    with tarfile.open(first) as tar:
        names = tar.getnames()
        assert names == sorted(names) and "twx_env_policy_rwr/experiment.yaml" in names
        assert {(m.mtime, m.uid, m.gid, m.uname, m.mode) for m in tar.getmembers()} == {(0, 0, 0, "", 0o644)}
        assert not any(n.endswith(("summary.md", "summary.json", ".png")) for n in names)


def test_report_on_an_archive_rebuilds_the_shipped_report(tmp_path):
    """``genenv-experiment report results/twx_levers.tar.xz:warm/source --out DIR`` unpacks the archive on demand and
    writes the report that ships in ``docs/curriculum/twx_levers/warm/source``; a folder the archive does not have
    is a clear error."""
    out = _cli("report", f"{ARCHIVES}/twx_levers.tar.xz:warm/source", "--cache", tmp_path / "cache",
               "--out", tmp_path / "report")
    assert out.returncode == 0, out.stderr[-2000:]
    for name in ("summary.md", "summary.json"):
        assert (tmp_path / "report" / name).read_bytes() == (REPORTS / "twx_levers/warm/source" / name).read_bytes()
    assert (tmp_path / "report" / "curves.png").stat().st_size > 10_000
    out = _cli("report", f"{ARCHIVES}/twx_levers.tar.xz:warm/nothing", "--cache", tmp_path / "cache")
    assert out.returncode == 2 and "no folder 'warm/nothing'" in out.stderr and "alpha075" in out.stderr


def test_a_member_outside_its_experiment_folder_is_refused(tmp_path):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("evil/../../outside.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    archive = tmp_path / "evil.tar.xz"
    archive.write_bytes(lzma.compress(raw.getvalue()))
    (tmp_path / SUMS).write_text(f"{sha256(archive)}  {archive.name}\n")
    with pytest.raises(ArchiveError, match="not a file or folder under evil/"):
        unpack(archive, tmp_path / "cache")
    assert not (tmp_path / "outside.txt").exists()


def test_a_running_experiment_ships_its_finished_runs_only(tmp_path, shipped):
    """``genenv-experiment archive EXP --finished-only`` on a running experiment (a copy of the shipped
    ``twx_env_policy_rwr`` with one run unfinished, checkpoints in a finished and an unfinished run, the live log):
    the archive holds the experiment's own files and every finished run's files, without checkpoints, logs or
    the unfinished run; once that run finishes, the same command gives the full archive's bytes."""
    folder = tmp_path / "twx_env_policy_rwr"
    shutil.copytree(shipped("twx_env_policy_rwr"), folder)
    full = pack(folder, tmp_path / "full")
    runs = sorted(p.parent for p in folder.rglob("done.json"))
    assert len(runs) >= 2
    open_run, finished = runs[-1], runs[0]
    done = (open_run / "done.json").read_bytes()
    (open_run / "done.json").unlink()
    for run in (open_run, finished):
        (run / "checkpoints" / "iter_3").mkdir(parents=True)
        (run / "checkpoints" / "iter_3" / "state.json").write_text("{}")
    (folder / "run.log").write_text("a live log\n")
    out = _cli("archive", folder, "--out", tmp_path / "ship", "--finished-only")
    assert out.returncode == 0, out.stderr[-2000:]
    with tarfile.open(tmp_path / "ship" / full.name) as tar:
        names = tar.getnames()
    with tarfile.open(full) as tar:
        everything = tar.getnames()
    unfinished = f"{folder.name}/{open_run.relative_to(folder).as_posix()}/"
    assert names == [n for n in everything if not n.startswith(unfinished)] and len(names) < len(everything)
    assert not any("checkpoints" in n or n.endswith(".log") for n in names)
    assert read_sums(tmp_path / "ship") == {full.name: sha256(tmp_path / "ship" / full.name)}
    (open_run / "done.json").write_bytes(done)
    shutil.rmtree(open_run / "checkpoints")
    assert _cli("archive", folder, "--out", tmp_path / "ship", "--finished-only").returncode == 0
    assert (tmp_path / "ship" / full.name).read_bytes() == full.read_bytes()
    missing = _cli("archive", tmp_path / "nothing", "--out", tmp_path / "ship")
    assert missing.returncode == 2 and "no such experiment folder" in missing.stderr
