"""The HTTP API: a FastAPI app over a MemoryService (app.py; the consolidation routes in summaries.py, recall in
recall.py, what every route shares in deps.py) and the tenant API keys it checks (keys.py).

Owns the table of sql/migrations/0013_api_keys.sql and the queries of sql/queries/api.sql (run by queries.py's
KeyQueries only: no other module of api/ runs a statement). A top layer like cli/: it may import anything in
memory_agent (service/, long_term/, db/); nothing but cli/ imports it. Needs the `api` extra (fastapi, uvicorn).
"""

from memory_agent.api.app import create_app
from memory_agent.api.keys import create_api_key, tenant_of_key

__all__ = ["create_api_key", "create_app", "tenant_of_key"]
