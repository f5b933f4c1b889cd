"""A small OpenAI-compatible chat-completions server on 127.0.0.1 for tests (real HTTP, real parsing).

Requests asking for structured output (`response_format` json_schema, or a tool named
MemorySummaryOutput) get a summary built by the offline summarizer from the prompt; other requests get a
chat reply `echo: <last user text>`. `mode` switches in failures: "error" (HTTP 500), "hang" (sleep
`hang_s`), "empty" (empty summary), "malformed" (content that is not JSON), "rate_limited" (HTTP 429 with
`Retry-After: <retry_after>`), "refusal" (OpenAI's refusal of any request: no content, `error_text` as its
`refusal`). `max_prompt_chars` makes it a
context-limited model (HTTP 400 past it). Streaming (`stream: true`) is answered as server-sent events, one chunk
per word.

A server without tool calling: `refuse_tools` answers HTTP 400 to any request offering `tools` (as many local
servers do), `refuse_response_format` the same to a `response_format`. A request that asks for JSON in its text
(the last message holds "Answer with one JSON object") gets the summary as JSON inside a code fence with a sentence
around it, or `text_answer` when set (garbage, say).

Tool calls: set `tool_plan` to {tool name: arguments}. A request that offers tools of those names and ends
with a user message is answered with one call per planned tool (in parallel, one assistant message); once
the last message is a tool result, the reply is `echo: <last user text> (tool results: <r1>; <r2>)`.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any

from memory_agent.llm.offline import offline_summary
from tests.local_server import LocalServer, text_of


class FakeOpenAI(LocalServer):
    def __init__(self) -> None:
        self.mode = "ok"
        self.delay_s = 0.0
        self.hang_s = 30.0
        self.tool_plan: dict[str, dict[str, Any]] | None = None
        self.summary_text: str | None = None  # when set, every summary is exactly this text
        self.error_text = "upstream exploded"  # the message of an HTTP 500 in mode "error"
        self.retry_after = "30"  # the Retry-After header of an HTTP 429 in mode "rate_limited"
        # A context-limited model: a request whose messages hold more characters is refused (HTTP 400,
        # context_length_exceeded), as OpenAI refuses a prompt over the model's context window.
        self.max_prompt_chars: int | None = None
        self.refuse_tools = False
        self.refuse_response_format = False
        self.text_answer: str | None = None
        # (status, message) of a refusal of tools or response_format in another server's words, e.g. llama.cpp's
        # (500, "tools param requires --jinja flag").
        self.refusal: tuple[int, str] | None = None
        # Keep connections open between requests (HTTP/1.1), as real servers do: a client then pools them.
        self.keep_alive = False
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        super().__init__(self._handler())

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def structured_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if _wants_summary(r)]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                if fake.keep_alive:
                    self.protocol_version, self.close_connection = "HTTP/1.1", False
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake.lock:
                    fake.requests.append(body)
                    mode = fake.mode
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                if fake.delay_s:
                    time.sleep(fake.delay_s)
                refused = (fake.refuse_tools and body.get("tools")) or (
                    fake.refuse_response_format and body.get("response_format")
                )
                if refused:
                    what = "tools" if body.get("tools") else "response_format"
                    if fake.refusal is not None:  # another server's words and status
                        status, message = fake.refusal
                        self._send(status, {"error": {"code": status, "message": message, "type": "server_error"}})
                        return
                    self._send(400, {"error": {"message": f"{what} is not supported", "type": "invalid_request_error"}})
                    return
                if mode == "refusal":  # OpenAI's structured refusal: no content, the reason in `refusal`
                    completion = _completion(body, "", tool=False)
                    message = {"role": "assistant", "content": None, "refusal": fake.error_text}
                    completion["choices"][0]["message"] = message
                    self._send(200, completion)
                    return
                messages = body.get("messages") or []
                if messages and "Answer with one JSON object" in text_of(messages[-1].get("content")):
                    prompt = "\n".join(text_of(m.get("content")) for m in messages)
                    fenced = json.dumps({"summary": offline_summary(prompt)})
                    text = f"Here is the summary:\n```json\n{fenced}\n```\nAnything else?"
                    self._send(
                        200, _completion(body, text if fake.text_answer is None else fake.text_answer, tool=False)
                    )
                    return
                wants_summary = _wants_summary(body)
                if wants_summary and mode == "error":
                    self._send(500, {"error": {"message": fake.error_text, "type": "server_error"}})
                    return
                if wants_summary and mode == "rate_limited":
                    error = {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}
                    self._send(429, {"error": error}, {"Retry-After": fake.retry_after})
                    return
                if wants_summary and mode == "hang":
                    time.sleep(fake.hang_s)
                prompt = "\n".join(text_of(m.get("content")) for m in body.get("messages", []))
                if fake.max_prompt_chars is not None and len(prompt) > fake.max_prompt_chars:
                    error = {
                        "message": f"This model's maximum context is {fake.max_prompt_chars} characters; the "
                        f"messages hold {len(prompt)}.",
                        "type": "invalid_request_error",
                        "code": "context_length_exceeded",
                    }
                    self._send(400, {"error": error})
                    return
                if wants_summary:
                    summary = "" if mode == "empty" else offline_summary(prompt)
                    if fake.summary_text is not None:
                        summary = fake.summary_text
                    arguments = json.dumps({"summary": summary})
                    if mode == "malformed":
                        arguments = "this is not json {"
                    self._send(200, _completion(body, arguments, tool=_tool_mode(body)))
                    return
                user = [m for m in body.get("messages", []) if m.get("role") == "user"]
                reply = "echo: " + (text_of(user[-1].get("content")) if user else "")
                calls = _planned_calls(body, fake.tool_plan)
                if calls:
                    if body.get("stream"):
                        self._stream_tool_calls(body, calls)
                    else:
                        self._send(200, _tool_calls_completion(body, calls))
                    return
                results = _tool_results(body) if fake.tool_plan else []
                if results:
                    reply += " (tool results: " + "; ".join(results) + ")"
                if body.get("stream"):
                    self._stream(body, reply)
                else:
                    self._send(200, _completion(body, reply, tool=False))

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test): nothing to answer

            def _stream(self, body: dict[str, Any], reply: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                cid = f"chatcmpl-{uuid.uuid4().hex[:10]}"
                words = reply.split(" ")
                for i, word in enumerate(words):
                    piece = word if i == 0 else " " + word
                    chunk = {
                        "id": cid,
                        "object": "chat.completion.chunk",
                        "created": int(time.time()),
                        "model": body.get("model", "fake"),
                        "choices": [
                            {"index": 0, "delta": {"role": "assistant", "content": piece}, "finish_reason": None}
                        ],
                    }
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                end = {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                }
                self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
                self.wfile.flush()

            def _stream_tool_calls(self, body: dict[str, Any], calls: list[dict[str, Any]]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                base = {
                    "id": f"chatcmpl-{uuid.uuid4().hex[:10]}",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": body.get("model", "fake"),
                }
                delta = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"index": i, **call} for i, call in enumerate(calls)],
                }
                for payload in (
                    {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                    {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
                ):
                    self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        return Handler


def _tool_mode(body: dict[str, Any]) -> bool:
    return any(t.get("function", {}).get("name") == "MemorySummaryOutput" for t in body.get("tools") or [])


def _wants_summary(body: dict[str, Any]) -> bool:
    fmt = body.get("response_format") or {}
    return fmt.get("type") in ("json_schema", "json_object") or _tool_mode(body)


def _planned_calls(body: dict[str, Any], plan: dict[str, dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The tool calls `plan` asks for, when the request offers those tools and ends with a user message."""
    messages = body.get("messages") or []
    if not plan or not messages or messages[-1].get("role") != "user":
        return []
    offered = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    return [
        {
            "id": f"call_{uuid.uuid4().hex[:8]}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        for name, arguments in plan.items()
        if name in offered
    ]


def _tool_results(body: dict[str, Any]) -> list[str]:
    """The tool results after the last assistant message, when the request ends with them."""
    messages = body.get("messages") or []
    results: list[str] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        results.insert(0, text_of(message.get("content")))
    return results


def _tool_calls_completion(body: dict[str, Any], calls: list[dict[str, Any]]) -> dict[str, Any]:
    completion = _completion(body, "", tool=False)
    completion["choices"][0]["message"] = {"role": "assistant", "content": None, "tool_calls": calls}
    completion["choices"][0]["finish_reason"] = "tool_calls"
    return completion


def _completion(body: dict[str, Any], text: str, *, tool: bool) -> dict[str, Any]:
    prompt_chars = sum(len(text_of(m.get("content"))) for m in body.get("messages", []))
    message: dict[str, Any] = {"role": "assistant", "content": text}
    finish = "stop"
    if tool:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{uuid.uuid4().hex[:8]}",
                    "type": "function",
                    "function": {"name": "MemorySummaryOutput", "arguments": text},
                }
            ],
        }
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:10]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": max(1, prompt_chars // 4),
            "completion_tokens": max(1, len(text) // 4),
            "total_tokens": max(1, prompt_chars // 4) + max(1, len(text) // 4),
        },
    }
