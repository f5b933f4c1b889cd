"""The OpenAPI document against the served app: schemathesis generates requests from it (bounded: at most 50
examples per operation, 127.0.0.1 only) and checks each answer — never a 5xx, status codes and bodies as
documented (but ids limited in UTF-8 bytes, which JSON Schema cannot state)."""

from __future__ import annotations

import asyncio

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.api.conftest import Served
from tests.api.test_http import remember_on

MAX_EXAMPLES = 50


def fuzz(url: str, key: str) -> list[str]:
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    checked = []
    for result in schema.get_all_operations():
        operation = result.ok()

        @settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(case=operation.as_strategy())
        def check(case: schemathesis.Case) -> None:
            # Refusals the schema cannot state are not failures: ids are limited in UTF-8 bytes, and a blank id
            # (Python's whitespace) is refused; JSON Schema counts characters and has no such class.
            case.call_and_validate(
                base_url=url,
                headers={"Authorization": f"Bearer {key}"},
                timeout=10,
                excluded_checks=[positive_data_acceptance],
            )

        check()
        checked.append(operation.label)
    return checked


async def test_the_served_app_conforms_to_its_openapi(served: Served):
    await remember_on(served, "acme", "ana", 1, "The user lives in Lyon")
    key = await served.key("acme")
    checked = await asyncio.to_thread(fuzz, served.url, key)
    assert sorted(checked) == [
        "DELETE /users/{user_id}",
        "GET /conversations/{conversation_id}/memory",
        "GET /health",
        "GET /memory/summaries",
        "GET /ready",
        "GET /users/{user_id}/export",
        "GET /users/{user_id}/items",
        "GET /users/{user_id}/recall",
        "POST /memory/summarize",
    ]
