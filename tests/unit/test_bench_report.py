"""The benchmark's table compares round latency under load at one number of conversations for every system:
that latency is queueing (rounds in flight / rounds per second), so at different counts its ratio says nothing."""

from __future__ import annotations

from benchmarks.report import ratio_table, render_markdown


def _system(conversations: int, rounds_per_s: float, same: dict[str, float] | None = None) -> dict:
    figures = {
        "conversations": conversations,
        "rounds_per_s": rounds_per_s,
        "round_median_ms": conversations / rounds_per_s * 1000,
        "round_p99_ms": 2 * conversations / rounds_per_s * 1000,
        "failed_rounds": 0,
    }
    concurrent = {**figures, "same_concurrency": same or dict(figures)}
    steady = {
        "overhead_median_ms": 10.0,
        "overhead_first20_median_ms": 10.0,
        "overhead_last20_median_ms": 10.0,
        "overhead_last20_over_first20": 1.0,
        "prompt_tokens_at_token_round": 100,
    }
    load = {"10": {"median_ms": 1.0}, "100": {"median_ms": 1.0}, "longest_over_shortest": 1.0}
    slow = {"round_p99_ms": 310.0, "p99_over_latency": 1.03}
    return {"label": "x", "steady": steady, "concurrent": concurrent, "slow": slow, "load": load}


def _results() -> dict:
    config = {
        "rounds": 10,
        "token_round": 5,
        "slow_rounds": 2,
        "slow_latency_s": 0.3,
        "load_lengths": [10, 100],
        "conversations": 1000,
        "baseline_conversations": 50,
        "concurrent_rounds": 20,
    }
    same = {"conversations": 50, "rounds_per_s": 150.0, "round_median_ms": 330.0, "round_p99_ms": 600.0}
    systems = {
        # 1,000 in flight at 110 rounds/s: ~9 s a round; at the baselines' 50: 330 ms
        "memory_agent": _system(1000, 110.0, {**same, "failed_rounds": 0}),
        "full_history": _system(50, 90.0),
        "summarization_middleware": _system(50, 84.0),
    }
    meta = {"config": config, "started_at": "t", "cpus": 2, "python": "3", "libraries": {}}
    return {"meta": meta, "systems": systems}


def test_latency_ratios_compare_the_same_number_of_conversations():
    results = _results()
    ratios, _ = ratio_table(results)
    middleware = results["systems"]["summarization_middleware"]["concurrent"]
    latency = ratios["concurrent.same_concurrency.round_median_ms"]["vs_summarization_middleware"]
    assert latency is not None and abs(latency - 330.0 / middleware["round_median_ms"]) < 1e-9
    assert ratios["concurrent.same_concurrency.round_p99_ms"]["vs_summarization_middleware"] < 1
    # No row divides memory_agent's latency at 1,000 conversations by a baseline's at 50.
    assert "concurrent.round_median_ms" not in ratios and "concurrent.round_p99_ms" not in ratios


def test_the_table_names_the_count_and_keeps_memory_agents_own_latency_in_the_note():
    results = _results()
    results["ratios"], results["targets"] = ratio_table(results)
    table = render_markdown(results, headline_only=True)
    assert "Concurrent, 50 conversations each system: round latency, median (ms) | 330 |" in table
    assert "memory_agent's round latency at its 1,000: median 9,091 ms" in table
