"""SummaryRunner: one `processing` memory row to `completed` or `failed`, with retries and a timeout per
model call. Incremental, as the design says: only the messages after the base memory are sent."""

from __future__ import annotations

import asyncio
import logging
import time

from langchain_core.messages import messages_from_dict

from memory_agent.conversation.messages import storable_text
from memory_agent.db.backend import MemoryBackend
from memory_agent.errors import SummarizationError
from memory_agent.settings import MemorySettings
from memory_agent.summarize.agent import MemoryAgent, SequencedMessage, SummaryResult

logger = logging.getLogger("memory_agent")


class SummaryRunner:
    """Runs summaries on the memory loop; never raises into its caller (an executor)."""

    def __init__(self, settings: MemorySettings, backend: MemoryBackend, agent: MemoryAgent) -> None:
        self.settings = settings
        self.backend = backend
        self.agent = agent

    async def run_summary(self, memory_id: int, user_id: str) -> str:
        """Summarize one `processing` row (user_id, memory_id) to `completed` or `failed`. Never raises; returns
        the final status."""
        backend = self.backend
        try:
            row = await backend.start_memory(memory_id, user_id=user_id)
        except Exception as exc:
            logger.error("Memory %s: could not start summarization: %s", memory_id, exc)
            return "processing"
        if row is None:
            logger.debug("Memory %s is no longer processing; nothing to do", memory_id)
            return "skipped"
        conversation_id = row["conversation_id"]
        start_seq, end_seq = row["start_sequence"], row["end_sequence"]
        base_end = row["base_end_sequence"]
        # Incremental: only messages after the base memory, and never before the window start.
        new_start = start_seq if base_end is None else max(base_end + 1, start_seq)
        started = time.perf_counter()
        error: str | None = None
        try:
            rows = await backend.get_messages(conversation_id, new_start, end_seq, user_id=user_id)
            if not rows:
                logger.debug("No new messages to summarize for %s", conversation_id)
                raise SummarizationError(f"no stored messages in {new_start}-{end_seq}")
            new_messages = [SequencedMessage(r["sequence_number"], messages_from_dict([r["message"]])[0]) for r in rows]
            result: SummaryResult | None = await self._summarize_with_retries(
                row["base_memory_text"], base_end, new_messages, start_seq, end_seq, memory_id
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            result = None
        elapsed_ms = int((time.perf_counter() - started) * 1000)
        try:
            if result is not None:
                if not await backend.complete_memory(
                    user_id=user_id,
                    memory_id=memory_id,
                    memory_text=storable_text(result.text),
                    generation_time_ms=elapsed_ms,
                    model_name=storable_text(result.model_name),
                    input_tokens=result.input_tokens,
                    output_tokens=result.output_tokens,
                    summarized_start=new_start,
                    summarized_end=end_seq,
                ):
                    logger.warning("Memory %s was reclaimed while summarizing; its result is discarded", memory_id)
                    return "discarded"
                logger.info("Summarized messages %s-%s for %s in %sms", start_seq, end_seq, conversation_id, elapsed_ms)
                if start_seq > 0:
                    logger.info("Sliding window: dropping seq 0-%s for %s", start_seq - 1, conversation_id)
                logger.debug("Memory %s status updated to completed", memory_id)
                return "completed"
            await backend.fail_memory(
                user_id=user_id,
                memory_id=memory_id,
                error=storable_text(error or "unknown error")[:4000],
                generation_time_ms=elapsed_ms,
                model_name=storable_text(self.agent.model_name),
                summarized_start=new_start,
                summarized_end=end_seq,
            )
            logger.warning(
                "Summarization of messages %s-%s for %s failed: %s", start_seq, end_seq, conversation_id, error
            )
            logger.debug("Memory %s status updated to failed", memory_id)
            return "failed"
        except Exception as exc:
            # The row stays `processing` and is reclaimed after processing_timeout_s.
            logger.error("Memory %s: could not record the summarization outcome: %s", memory_id, exc)
            return "processing"

    async def _summarize_with_retries(
        self,
        previous_summary: str | None,
        base_end: int | None,
        new_messages: list[SequencedMessage],
        start_seq: int,
        end_seq: int,
        memory_id: int,
    ) -> SummaryResult:
        settings = self.settings
        delay = settings.summary_retry_backoff_s
        for attempt in range(1, settings.summary_max_attempts + 1):
            try:
                return await asyncio.wait_for(
                    self.agent.summarize(
                        previous_summary=previous_summary,
                        base_end_sequence=base_end,
                        new_messages=new_messages,
                        window_start_seq=start_seq,
                        window_end_seq=end_seq,
                    ),
                    timeout=settings.summary_timeout_s,
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
                    exc = SummarizationError(f"Timeout: summarizer did not answer within {settings.summary_timeout_s}s")
                if attempt == settings.summary_max_attempts:
                    raise exc
                logger.info("Memory %s: attempt %s failed (%s); retrying in %.1fs", memory_id, attempt, exc, delay)
                await asyncio.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")
