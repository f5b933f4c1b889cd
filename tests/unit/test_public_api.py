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
# Not there yet, with its count. The list only shrinks.
LEFT: dict[str, int] = {}


def public_packages() -> list[Any]:
    names = [module.name for module in pkgutil.iter_modules(memory_agent.__path__, "memory_agent.") if module.ispkg]
    return [memory_agent, *(importlib.import_module(name) for name in names)]


def is_record(cls: type) -> bool:
    return issubclass(cls, BaseModel | tuple) or dataclasses.is_dataclass(cls)


def class_functions(prefix: str, exported: type, *, constructed: bool = True) -> Iterator[tuple[str, Any]]:
    for member in dir(exported):
        if member.startswith("_") and (member != "__init__" or not constructed):
            continue
        attribute = inspect.getattr_static(exported, member)
        function = getattr(attribute, "__func__", attribute)
        if inspect.isfunction(function) and function.__module__.startswith("memory_agent"):
            yield f"{prefix}.{member}", function


def public_functions() -> Iterator[tuple[str, Any]]:
    """(dotted name, function) for every function of the public API, the tiers' facades a MemoryService hands
    out (memory.conversations, memory.long_term, memory.transfers) included."""
    for package in public_packages():
        for name in getattr(package, "__all__", ()):
            exported = getattr(package, name)
            if inspect.isclass(exported):
                if is_record(exported) or not exported.__module__.startswith("memory_agent"):
                    continue
                yield from class_functions(f"{package.__name__}.{name}", exported)
            elif inspect.isfunction(exported):
                yield f"{package.__name__}.{name}", exported
    for attribute in ("conversations", "long_term", "transfers"):
        facade = inspect.signature(getattr(memory_agent.MemoryService, attribute).fget, eval_str=True)
        # The service makes its facades: their constructors are not the user's to call.
        yield from class_functions(
            f"memory_agent.MemoryService.{attribute}", facade.return_annotation, constructed=False
        )


def parameter_count(function: Any) -> int:
    return len([name for name in inspect.signature(function).parameters if name not in ("self", "cls")])


def test_the_walk_sees_the_public_api():
    names = dict(public_functions())
    for expected in (
        "memory_agent.MemoryService.long_term.recall",
        "memory_agent.MemoryService.conversations.prepare_round",
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
