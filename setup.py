"""setuptools shim: installs every package under the project's top-level folders as ``genenv.<folder>...``
(``benchmarks/bfcl`` → ``genenv.benchmarks.bfcl``), found on disk, so that a new benchmark folder needs no edit to the
packaging. All other metadata is in ``pyproject.toml``."""
from setuptools import find_packages, setup

FOLDERS = ("envs", "benchmarks", "runtime", "trainer", "rewards", "eval", "configs")

setup(
    packages=[f"genenv.{name}" for name in find_packages(include=[p for f in FOLDERS for p in (f, f + ".*")])],
    package_dir={f"genenv.{folder}": folder for folder in FOLDERS},
)
