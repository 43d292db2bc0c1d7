"""tokenbench: benchmark LLM inference servers with realistic load and exact per-chunk timing."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tokenbench")  # one source: the installed package's metadata (pyproject.toml)
except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"
