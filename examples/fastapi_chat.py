"""A small chat HTTP server: one request is one round, the conversation is the path's thread id.

    OPENAI_API_KEY=sk-... uvicorn examples.fastapi_chat:app --port 8000
    curl -X POST localhost:8000/chat/alice -H 'content-type: application/json' -d '{"message": "hi"}'
    curl localhost:8000/chat/alice/memory

The MemoryService is opened and closed with the app (FastAPI lifespan); every request runs the agent with
`ainvoke` on the server's event loop. The database comes from MemorySettings (MEMORY_AGENT_DATABASE_URL, or
an embedded PostgreSQL when unset).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from pydantic import BaseModel, Field

from memory_agent import InvalidInputError, MemoryMiddleware, MemoryService, openai_chat_model


class ChatRequest(BaseModel):
    message: str = Field(min_length=1, description="The user's message for this round.")


class ChatReply(BaseModel):
    thread_id: str
    reply: str


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with MemoryService.from_settings() as memory:  # drains in-flight summaries on shutdown
        app.state.memory = memory
        app.state.agent = create_agent(
            openai_chat_model(),
            [],
            system_prompt="You are a helpful assistant.",
            middleware=[MemoryMiddleware(memory)],
        )
        yield


app = FastAPI(title="memory_agent chat", lifespan=lifespan)


@app.post("/chat/{thread_id}")
async def chat(thread_id: str, body: ChatRequest, request: Request) -> ChatReply:
    try:
        result = await request.app.state.agent.ainvoke(
            {"messages": [HumanMessage(body.message)]}, {"configurable": {"thread_id": thread_id}}
        )
    except InvalidInputError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc
    return ChatReply(thread_id=thread_id, reply=result["messages"][-1].text)


@app.get("/chat/{thread_id}/memory")
async def memory_history(thread_id: str, request: Request) -> list[dict[str, Any]]:
    """Every memory version of the conversation, oldest first (the audit trail)."""
    memory: MemoryService = request.app.state.memory
    try:
        versions = await memory.conversations.get_memory_history(thread_id)
    except InvalidInputError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc
    return [
        v.model_dump(
            mode="json",
            include={"memory_id", "status", "start_sequence", "end_sequence", "base_memory_id", "memory_text"},
        )
        for v in versions
    ]
