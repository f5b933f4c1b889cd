"""No function of the public API takes more than six parameters: where a call needs more values, they travel as
a parameter object (a ConversationKey, a StoredRound, a settings group, …).

The public API is what memory_agent and each of its sub-packages export in `__all__`: the exported functions,
and the constructor and public methods (no leading underscore) of each exported class that memory_agent defines
(methods inherited from other libraries are theirs). Data records (pydantic models, dataclasses, named tuples)
are left out: their constructors take their fields, by keyword. `self` and `cls` are not counted."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

import memory_agent

MOST_PARAMETERS = 6
# Not there yet, with its count: the pool factory takes its pool's options loose. The list only shrinks.
LEFT = {
    "memory_agent.MemoryBackend.create_pool": 7,
}


def public_packages() -> list[Any]:
    names = [module.name for module in pkgutil.iter_modules(memory_agent.__path__, "memory_agent.") if module.ispkg]
    return [memory_agent, *(importlib.import_module(name) for name in names)]


def is_record(cls: type) -> bool:
    return issubclass(cls, BaseModel | tuple) or dataclasses.is_dataclass(cls)


def public_functions() -> Iterator[tuple[str, Any]]:
    """(dotted name, function) for every function of the public API."""
    for package in public_packages():
        for name in getattr(package, "__all__", ()):
            exported = getattr(package, name)
            if inspect.isclass(exported):
                if is_record(exported) or not exported.__module__.startswith("memory_agent"):
                    continue
                for member in dir(exported):
                    if member.startswith("_") and member != "__init__":
                        continue
                    attribute = inspect.getattr_static(exported, member)
                    function = getattr(attribute, "__func__", attribute)
                    if inspect.isfunction(function) and function.__module__.startswith("memory_agent"):
                        yield f"{package.__name__}.{name}.{member}", function
            elif inspect.isfunction(exported):
                yield f"{package.__name__}.{name}", exported


def parameter_count(function: Any) -> int:
    return len([name for name in inspect.signature(function).parameters if name not in ("self", "cls")])


def test_the_walk_sees_the_public_api():
    names = dict(public_functions())
    for expected in (
        "memory_agent.MemoryService.recall",
        "memory_agent.long_term.remember",
        "memory_agent.with_memory",
    ):
        assert expected in names


def test_no_public_function_takes_more_than_six_parameters():
    too_many = {
        name: parameter_count(function)
        for name, function in public_functions()
        if parameter_count(function) > MOST_PARAMETERS
    }
    assert too_many == LEFT
