"""tokenbench: benchmark LLM inference servers with realistic load and exact per-chunk timing."""

__version__ = "0.2.1"
