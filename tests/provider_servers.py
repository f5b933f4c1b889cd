"""Small provider servers on 127.0.0.1 beside tests/openai_server.py, spoken to by the real LangChain integrations:
the Anthropic Messages API (`POST /v1/messages`, for langchain-anthropic) and Ollama's chat API (`POST /api/chat`,
for langchain-ollama, streamed as NDJSON or answered whole).

A request offering the MemorySummaryOutput tool is answered with a call of it, its summary built by the offline
summarizer from the prompt. Ollama's `refuse_tools` answers HTTP 400 "does not support tools" to a request with
tools (as Ollama does for a model without tool calling); a request with a `format` (a JSON schema) then gets the
summary as JSON text. `answer_with`, when set, is every answer (HTTP 200), whatever was asked: an answer not of the
API's shape, say. Every request body is kept in `requests`.
"""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any

from memory_agent.llm.offline import offline_summary
from tests.local_server import LocalServer, text_of


class _Stub(LocalServer):
    """A threaded HTTP server whose POSTs go to `answer(path, body) -> (status, payload or NDJSON lines)`."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.answer_with: Any = None
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with stub.lock:
                    stub.requests.append(body)
                status, payload = (
                    (200, stub.answer_with) if stub.answer_with is not None else stub.answer(self.path, body)
                )
                lines = payload if isinstance(payload, list) else None
                data = b"".join(json.dumps(line).encode() + b"\n" for line in lines) if lines else b""
                if lines is None:
                    data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-ndjson" if lines else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        super().__init__(Handler)

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        raise NotImplementedError


class FakeAnthropic(_Stub):
    """The Messages API: a MemorySummaryOutput tool offered is called, anything else is echoed."""

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if not path.endswith("/v1/messages"):
            return 404, {"type": "error", "error": {"type": "not_found_error", "message": path}}
        prompt = "\n".join([text_of(body.get("system"))] + [text_of(m.get("content")) for m in body["messages"]])
        tools = {tool.get("name") for tool in body.get("tools") or []}
        if "MemorySummaryOutput" in tools:
            content = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:12]}",
                    "name": "MemorySummaryOutput",
                    "input": {"summary": offline_summary(prompt)},
                }
            ]
            stop = "tool_use"
        else:
            content, stop = (
                [{"type": "text", "text": "echo: " + text_of(body["messages"][-1].get("content"))}],
                "end_turn",
            )
        return 200, {
            "id": f"msg_{uuid.uuid4().hex[:12]}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": max(1, len(prompt) // 4), "output_tokens": 20},
        }


class FakeOllama(_Stub):
    """Ollama's /api/chat. `refuse_tools`: a model without tool calling (HTTP 400 to a request with tools)."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse_tools = False

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if not path.endswith("/api/chat"):
            return 404, {"error": f"no route {path}"}
        model = body.get("model")
        if body.get("tools") and self.refuse_tools:
            return 400, {"error": f"registry.ollama.ai/library/{model} does not support tools"}
        prompt = "\n".join(text_of(m.get("content")) for m in body.get("messages", []))
        summary = {"summary": offline_summary(prompt)}
        message: dict[str, Any] = {"role": "assistant", "content": ""}
        if any(t.get("function", {}).get("name") == "MemorySummaryOutput" for t in body.get("tools") or []):
            message["tool_calls"] = [{"function": {"name": "MemorySummaryOutput", "arguments": summary}}]
        elif body.get("format"):
            message["content"] = json.dumps(summary)
        else:
            message["content"] = "echo: " + text_of(body["messages"][-1].get("content"))
        stamp = "2026-01-01T00:00:00Z"
        done = {
            "model": model,
            "created_at": stamp,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": max(1, len(prompt) // 4),
            "eval_count": 20,
        }
        if body.get("stream", True):
            return 200, [{"model": model, "created_at": stamp, "message": message, "done": False}, done]
        return 200, {**done, "message": message}
