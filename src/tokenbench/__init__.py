"""tokenbench: benchmark LLM inference servers with realistic load and exact per-chunk timing."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """``__version__``: one source, the installed package's metadata (pyproject.toml), read when
    asked for (importlib.metadata costs every process that imports tokenbench tens of ms)."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("tokenbench")
        except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module 'tokenbench' has no attribute {name!r}")
