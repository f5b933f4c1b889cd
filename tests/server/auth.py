"""A custom auth handler for the LangGraph server under test: a bearer token names its user (and tenant)."""

from langgraph_sdk import Auth

USERS = {
    "alice-token": {"identity": "alice", "tenant_id": "acme"},
    "bob-token": {"identity": "bob", "tenant_id": "acme"},
}

auth = Auth()


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    token = (authorization or "").removeprefix("Bearer ").strip()
    if token not in USERS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="unknown token")
    return USERS[token]
