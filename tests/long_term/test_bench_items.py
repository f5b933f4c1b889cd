"""The long-term items benchmark end to end at toy sizes: every figure reported, the races settled."""

from __future__ import annotations

import json

from benchmarks.long_term_items import WRITERS, main
from tests.long_term.replay_data import FAKE, write_dataset


def test_items_benchmark_small(server_url, tmp_path, capsys):
    out = tmp_path / "items.json"
    replay = write_dataset(tmp_path, FAKE)
    sizes = ["--calls", "3", "--users", "2", "--items-per-user", "10"]
    assert main(["--database-url", server_url, *sizes, "--out", str(out), "--replay", str(replay)]) == 0
    results = json.loads(out.read_text())
    assert results["same_10_items_stated_100_times_rows"] == 10
    assert results[f"race_{WRITERS}_writers_same_fact"] | {"wall_ms": 0} == {
        "wall_ms": 0,
        "current_rows": 1,
        "versions": 1,
    }
    assert results[f"race_{WRITERS}_writers_different_values"]["current_rows"] == 1
    assert results["forget_conversation"]["items_deleted"] == 100
    assert "| remember_10_new |" in capsys.readouterr().out
    # The replayed facts, written through the service's rounds, then as the summary job writes them.
    loads, cost = results["replay"]["loads"], results["replay"]["write_cost"]
    assert loads["replay, long-term on"]["items"] == loads["replay, long-term on"]["replay"]["items"] >= 2
    assert loads["replay, long-term off"]["items"] == 0 and loads["offline, long-term on"]["items"] == 0
    assert cost["rows_by_table"]["items"] >= loads["replay, long-term on"]["items"]
    assert cost["statements_per_version"] > 0 and cost["per_round"]["rows"] > 0
    assert "Replayed model output" in (tmp_path / "items.md").read_text()
