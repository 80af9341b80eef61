"""The cases of the API-Bank agreement study: gold calls and perturbed arguments, written as model text and scored
by ``genenv/APIBank-v0``.

The study (``lab/benches/api_bank_agreement.py``; its result ships as ``lab/figures/api_bank_agreement.json``)
compares our verdict on each case with the released evaluator's; the test suite replays the recorded verdicts
against `case_reward`. A case is ``(task, variant)``: ``variant`` is ``"gold"`` (the task's gold call) or
``"<perturbation>:<argument>"``. Perturbations of a string or number argument (`perturbations`): padded
with spaces (``pad``), upper-cased (``upper``), lower-cased (``lower``), without spaces (``nospace``), with spaces
around operators and commas (``spaced``) and replaced (``wrong``), each kept only where it changes the text. Of
every argument whatever its value (`ARGUMENT_CASES`): the call without it (``omit``) and with it given as
``''`` (``empty``, moved last). Each case is written as the benchmark's ``API-Request: [Name(k='v', ...)]`` line
(`case_text`).
"""
from __future__ import annotations

import re
from typing import Any, Iterator

from genenv.benchmarks.api_bank.env import APIBankEnv
from genenv.envs.parsing import ToolCall
from genenv.envs.task import Task
from genenv.envs.wrappers import TextActionWrapper

__all__ = ["ARGUMENT_CASES", "argument_text", "case_call", "case_reward", "case_text", "cases", "perturbations"]

ARGUMENT_CASES = ("omit", "empty")
"""The perturbations of every argument, whatever its value: left out, or given as ``''``."""


def perturbations(value: Any) -> Iterator[tuple[str, Any]]:
    """The ``(name, perturbed value)`` pairs of one argument value (names: ``pad``, ``upper``, ``lower``,
    ``nospace``, ``spaced``, ``wrong``), each only where it changes the value's text. Strings and numbers only
    (a number is perturbed as its text); booleans, lists and dicts yield nothing."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return
    text = str(value)
    out = {"pad": f" {text} ", "upper": text.upper(), "lower": text.lower(), "nospace": text.replace(" ", ""),
           "spaced": re.sub(r"\s*([+\-*/(),])\s*", r" \1 ", text).strip(), "wrong": "zq" + text[::-1]}
    for name, new in out.items():
        if new != text:
            yield name, new


def case_call(task: Task, variant: str) -> ToolCall:
    """The call of a case: the task's gold call, or ``"<perturbation>:<argument>"`` applied to it (``omit``
    removes the argument; ``empty`` gives it as ``''``, moved last; any other name replaces its value by that
    perturbation's).

    Raises:
        KeyError: the argument is not one of the gold call's, or the perturbation does not apply to its value
            (`perturbations` yields no such name).
        ValueError: ``variant`` is neither ``"gold"`` nor of the form ``"<perturbation>:<argument>"``.
    """
    args = dict(task.gold.get("arguments") or {})
    if variant != "gold":
        kind, param = variant.split(":", 1)
        if kind in ARGUMENT_CASES:
            del args[param]
            if kind == "empty":
                args[param] = ""
        else:
            args[param] = dict(perturbations(args[param]))[kind]
    return ToolCall(task.gold["name"], args)


def argument_text(value: Any) -> str:
    """An argument value as the case text writes it: ``repr`` of a list or dict, else ``repr`` of its text
    (numbers are written as strings, as in the data)."""
    if isinstance(value, (list, dict)):
        return repr(value)
    return repr(str(value))


def case_text(task: Task, variant: str) -> str:
    """The model text of a case: ``API-Request: [Name(k='v', ...)]`` (values by `argument_text`).

    Raises:
        KeyError, ValueError: as `case_call`.
    """
    call = case_call(task, variant)
    args = ", ".join(f"{k}={argument_text(v)}" for k, v in call.arguments.items())
    return f"API-Request: [{call.name}({args})]"


def cases(tasks: list[Task]) -> list[tuple[Task, str]]:
    """Every ``(task, variant)`` of the study for ``tasks``: per task its gold call first, then, per gold argument
    in order, its applicable `perturbations` and the `ARGUMENT_CASES`."""
    out = []
    for task in tasks:
        out.append((task, "gold"))
        for param, value in (task.gold.get("arguments") or {}).items():
            out += [(task, f"{kind}:{param}") for kind, _ in perturbations(value)]
            out += [(task, f"{kind}:{param}") for kind in ARGUMENT_CASES]
    return out


def case_reward(task: Task, text: str, reading: str) -> float:
    """Our reward (0.0 or 1.0) for the model text ``text`` on ``task`` under the reading ``reading``
    (``"official"`` or ``"lenient"``): one step of ``genenv/APIBank-v0`` on that task alone.

    Raises:
        ValueError: ``reading`` is not a parsing setting of the env.
    """
    env = TextActionWrapper(APIBankEnv(tasks=[task], parsing=reading))
    env.reset(options={"task_index": 0})
    return env.step(text)[1]
