"""Parts, not bases: no class of memory_agent is built from two of memory_agent's own classes (a query object, the
schema's migrations, procrastinate's schema and the Citus distribution, the summary runner's follow-ups are held as
attributes), so a reader finds each method where its class is defined."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import memory_agent


def test_no_class_has_two_of_the_packages_classes_as_bases():
    mixed = []
    for module_info in pkgutil.walk_packages(memory_agent.__path__, "memory_agent."):
        if module_info.name.endswith("__main__"):  # runs the command line when imported
            continue
        module = importlib.import_module(module_info.name)
        for name, cls in vars(module).items():
            if inspect.isclass(cls) and cls.__module__ == module.__name__:
                own = [base.__qualname__ for base in cls.__bases__ if base.__module__.startswith("memory_agent.")]
                if len(own) > 1:
                    mixed.append(f"{module.__name__}.{name}({', '.join(own)})")
    assert mixed == []
