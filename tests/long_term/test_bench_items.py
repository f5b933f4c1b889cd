"""The long-term items benchmark end to end at toy sizes: every figure reported, the races settled."""

from __future__ import annotations

import json

from benchmarks.long_term_items import WRITERS, main


def test_items_benchmark_small(server_url, tmp_path, capsys):
    out = tmp_path / "items.json"
    assert (
        main(
            ["--database-url", server_url, "--calls", "3", "--users", "2", "--items-per-user", "10", "--out", str(out)]
        )
        == 0
    )
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
