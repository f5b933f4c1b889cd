"""The benchmark harness end to end at toy sizes: every system measured, every ratio and target reported."""

from __future__ import annotations

import json

from benchmarks.report import BASELINES, SUBJECT, metric_rows
from benchmarks.run import BenchConfig, run


def test_bench_harness_small(server_url, tmp_path):
    config = BenchConfig(
        rounds=6,
        block_rounds=3,
        warmup_rounds=1,
        token_round=4,
        slow_rounds=2,
        slow_latency_s=0.01,
        load_lengths=(10, 20),
        load_repeats=2,
        conversations=3,
        concurrent_rounds=4,
        baseline_conversations=2,
        database_url=server_url,
        out_dir=tmp_path,
        plot=True,
        floor_repeats=10,
        obs_conversations=30,
        obs_rounds=4,
        obs_repeats=2,
        recall_conversations=3,
        recall_turns=10,
        recall_items=50,
        recall_repeats=1,
        locomo="off",  # the development split's figures are make bench's, not a smoke test's
        model_side_rounds=8,
    )
    run(config)

    results = json.loads((tmp_path / "latest.json").read_text())
    assert set(results["systems"]) == {SUBJECT, *BASELINES}
    for name, entry in results["systems"].items():
        assert {"steady", "slow", "load", "concurrent"} <= set(entry), name
        assert len(entry["steady"]["overhead_ms"]) == 6
        assert len(entry["steady"]["prompt_tokens"]) == 6
        assert entry["concurrent"]["rounds_per_s"] > 0
    for path, _ in metric_rows(results):
        assert set(results["ratios"][path]) == {f"vs_{b}" for b in BASELINES}, path
    # Ratios exist wherever both sides measured something non-zero.
    assert results["ratios"]["steady.overhead_median_ms"]["vs_summarization_middleware"] > 0
    assert results["ratios"]["steady.prompt_tokens_at_token_round"]["vs_full_history"] > 0
    assert len(results["targets"]) == 6
    assert all(isinstance(t["holds"], bool) for t in results["targets"])
    concurrent = results["systems"][SUBJECT]["concurrent"]
    assert concurrent["duplicate_versions"] == 0
    # Latency is compared at the baselines' count of conversations: memory_agent runs that many too.
    assert concurrent["conversations"] == 3 and concurrent["same_concurrency"]["conversations"] == 2
    assert concurrent["same_concurrency"]["failed_rounds"] == 0
    assert results["systems"]["summarization_middleware"]["concurrent"]["same_concurrency"]["conversations"] == 2
    assert concurrent["drained"] is True
    assert (tmp_path / "latest.md").read_text().count("|") > 50
    assert (tmp_path / "latest.png").stat().st_size > 1000
    observability = results["observability"]
    assert (observability["data"]["conversations"], observability["data"]["round_metrics"]) == (30, 120)
    assert set(observability["in_process"]) == {"stats", "inspect", "at"}
    assert all(len(entry["samples_ms"]) == 2 for entry in observability["in_process"].values())
    assert set(observability["cli_ms"]) == {"--help (start-up only)", "stats --json", "inspect", "at"}
    assert len(observability["targets"]) == 3 and all(isinstance(t["holds"], bool) for t in observability["targets"])
    assert "Observability at 30 conversations" in (tmp_path / "latest.md").read_text()
    model_side = results["model_side"]
    for name in (SUBJECT, "summarization_middleware"):
        entry = model_side[name]
        assert entry["summarizer_calls_per_1000_rounds"] >= 0 and entry["prompt_tokens_per_round"] > 2000, name
        assert 0 <= entry["prefix_kept_share"] <= 1 and entry["summarizer_input_tokens_per_1000_rounds"] >= 0, name
        assert set(entry["dollars_per_1000_rounds"]) == {"openai", "anthropic"}, name
        assert all(d["total"] > 0 for d in entry["dollars_per_1000_rounds"].values()), name
    assert model_side["full_history"]["prefix_kept_share"] == 1.0  # history only grows: every round extends the last
    assert len(model_side["targets"]) == 6 and "Model side, 8 rounds" in (tmp_path / "latest.md").read_text()

    recall = results["recall"]
    assert recall["quality"]["figures"]["synthetic, english OR"]["recall"]["@5"] > 0
    assert "locomo dev" in recall["quality"]["skipped"]
    assert recall["latency"]["recall_p95_over_load_context_p95"] > 0
    round_start = recall["latency"]["round_start"]
    assert {"off", "none"} <= set(round_start["figures"]) and round_start["rounds_per_variant"] == 8
    # Each way of recall beside recall off of its own pair: no e5 rounds among those without an embedder.
    assert set(round_start["off_by_pair"]) == set(round_start["added_p95_ms"]) == set(round_start["figures"]) - {"off"}
    assert round_start["model_calls_on_read_path"] == 0 and round_start["recall_errors"] == 0
    assert 0 < round_start["block_tokens_max"]["none"] <= round_start["block_token_limit"]
    assert "added p95" in (tmp_path / "recall.md").read_text()
    # Without the LoCoMo split only the round start's cost has a target; each says whether it holds.
    assert recall["targets"] and all(t["target"].startswith("added round-start p95") for t in recall["targets"])
    assert all(isinstance(t["holds"], bool) for t in recall["targets"])
    assert "| Target | Value | Limit | Holds |" in (tmp_path / "recall.md").read_text()


def test_bench_observability_alone(server_url, tmp_path):
    from benchmarks.run import main

    assert (
        main(
            [
                "--only",
                "observability",
                "--obs-conversations",
                "20",
                "--obs-rounds",
                "3",
                "--obs-repeats",
                "1",
                "--database-url",
                server_url,
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    results = json.loads((tmp_path / "observability.json").read_text())
    assert results["observability"]["data"]["messages"] == 20 * 3 * 2
    assert not (tmp_path / "latest.json").exists()  # a full run's results are left alone


def test_recall_targets_read_the_locomo_runs_that_were_made():
    from benchmarks.recall import recall_targets

    def run(at5, at10, block, own5):
        return {"recall": {"@5": at5, "@10": at10, "in_block": block, "own_turn": {"@5": own5}}}

    stage = {
        "quality": {"figures": {"locomo dev, e5": run(0.89, 0.92, 0.88, 0.70), "locomo dev, none": run(0.87, 0, 0, 0)}},
        "latency": {"round_start": {"added_p95_ms": {"none": 5.5, "e5": 29.0}}},
    }
    holds = {t["target"]: t["holds"] for t in recall_targets(stage)}
    assert holds == {
        "e5 @5 >= 0.88": True,
        "e5 @10 >= 0.93": False,
        "e5, evidence in the block (shown whole) >= 0.88": True,
        "e5, the hit's own turn @5 >= 0.72": False,
        "no embedder @5 >= 0.83": True,
        "e5 @5 - no embedder @5 >= 0.03": False,
        "added round-start p95, no embedder <= 5 ms": False,
        "added round-start p95, e5 <= 30 ms": True,
    }
