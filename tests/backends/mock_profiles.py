"""Profiles whose "server" is a `tokenbench mock` process (or one that exits at once), for the
tests of a launch in front of another (tests/backends/test_layered_launch.py, test_fleet_launch.py)."""

import sys

from tokenbench.backends.base import Launch, LaunchSpec, Profile


def mock_launch(spec: LaunchSpec) -> Launch:
    return Launch((sys.executable, "-m", "tokenbench", "mock", "--port", str(spec.port)))


def failing_launch(spec: LaunchSpec) -> Launch:
    return Launch((sys.executable, "-c", "import sys; sys.exit(3)"))


def mock_profile(name: str, local, **fields) -> Profile:
    """A profile that launches ``local``, ready at /health; ``fields`` override the rest."""
    defaults = dict(
        name=name,
        title=name.upper(),
        apis=("completions",),
        default_port=1,
        ready_path="/health",
        local=local,
        container=local,
        metrics=None,
        default_model=lambda: "engine-model",
    )
    return Profile(**{**defaults, **fields})
