"""Benchmarks: memory_agent against what a LangGraph user would otherwise pick, in one process, one run."""
