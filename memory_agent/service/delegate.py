"""delegate: a MemoryService method that is a tier facade's method, written once.

`prepare_round = delegate("conversations", ConversationMemory.prepare)` makes `memory.prepare_round(...)` run
`memory.conversations.prepare(...)`: the signature and docstring are the facade method's (inspect, help() and the
docs reference read them there, through `__wrapped__`), and mypy checks calls against them. The facade is looked
up when the coroutine runs, so a service that is not open fails as its own methods do: on await.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")

Method = Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]


@overload
def delegate(tier: str, method: Method[P, R]) -> Method[P, R]: ...


@overload
def delegate(tier: str, method: Method[P, R], *, then: Callable[[R], S], doc: str) -> Method[P, S]: ...


def delegate(
    tier: str, method: Method[P, Any], *, then: Callable[[Any], Any] | None = None, doc: str | None = None
) -> Method[P, Any]:
    """The coroutine method `method` of the facade the service's property `tier` holds, as a method of the service.

    `then` maps the facade's result to the service's (its return annotation becomes the method's), and `doc` is
    then the method's own docstring: the same call, a different answer."""

    async def delegated(service: Any, /, *args: P.args, **kwargs: P.kwargs) -> Any:
        result = await method(getattr(service, tier), *args, **kwargs)
        return result if then is None else then(result)

    functools.update_wrapper(delegated, method)
    if then is not None:
        returns = inspect.signature(then, eval_str=True).return_annotation
        signature = inspect.signature(method, eval_str=True).replace(return_annotation=returns)
        delegated.__signature__ = signature  # type: ignore[attr-defined]
        delegated.__doc__ = doc
    return delegated
