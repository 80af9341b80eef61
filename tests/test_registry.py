"""Registration by decorator and discovery: a new benchmark needs no edit to the registries."""
from __future__ import annotations

import sys

import pytest

from genenv.benchmarks.registry import BENCHMARKS, register_benchmark
from genenv.benchmarks.spec import BenchmarkSpec
from genenv.envs.bamboogle import BamboogleEnv
from genenv.envs.registry import ENVS, env_entry, import_submodules, register_env


def test_every_module_with_a_decorator_is_discovered():
    assert {"bfcl", "bfcl_multi_turn", "bamboogle", "twx"} <= set(ENVS) and set(ENVS) == set(BENCHMARKS)
    assert env_entry("twx").entry_point == "genenv.envs.twx:TextWorldExpressEnv"
    with pytest.raises(KeyError, match="registered: .*bamboogle"):
        env_entry("no_such_benchmark")


def test_conflicting_registrations_are_refused(monkeypatch):
    monkeypatch.setattr("genenv.envs.registry.ENVS", dict(ENVS))

    class Copycat(BamboogleEnv):
        """Another class claiming Bamboogle's name and id."""

    with pytest.raises(ValueError, match="already registered"):
        register_env("genenv/Bamboogle-v0")(Copycat)

    class Nameless(BenchmarkSpec):
        """A spec that forgot its name."""

    with pytest.raises(ValueError, match="must set the class attribute 'name'"):
        register_benchmark(Nameless)


def test_a_module_that_fails_to_import_is_recorded_not_fatal(tmp_path, monkeypatch):
    pkg = tmp_path / "plugpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "good.py").write_text("VALUE = 1\n")
    (pkg / "broken.py").write_text("import a_module_that_does_not_exist\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    errors: dict[str, str] = {}
    import_submodules("plugpkg", errors)
    assert "plugpkg.good" in sys.modules and set(errors) == {"broken"}
    assert "a_module_that_does_not_exist" in errors["broken"]
