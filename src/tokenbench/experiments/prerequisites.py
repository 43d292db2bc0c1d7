"""What an experiment's servers need on this machine, checked before its first cell: each launched
entry's command rendered (a serving layer's venv, a knob it cannot map: the profile's BackendError,
e.g. Triton's "make triton") and its executable found (--engine-bin / ``engine_bin`` such as the
vLLM CPU venv's python). One refusal naming every entry that cannot start and what to install,
rather than cells that fail one by one after others ran."""

from __future__ import annotations

import shutil
from collections.abc import Sequence

from tokenbench.backends import get_profile
from tokenbench.backends.server import check_launch
from tokenbench.errors import BackendError
from tokenbench.experiments.spec import ExperimentError, ServerPlan

# Where the repository's setup scripts put an engine's venv -> the make target that builds it.
_MAKE = {
    ".cache/vllm-venv": "make vllm-cpu",
    ".cache/rayllm-venv": "make rayllm-cpu",
    ".cache/triton-venv": "make triton",
    ".cache/router-venv": "make routers",
}


def _install_hint(executable: str) -> str:
    target = next((make for venv, make in _MAKE.items() if venv in executable), None)
    return f"run `{target}` from the repository root" if target else "install it, or set engine_bin to its path"


def missing(plan: ServerPlan) -> str | None:
    """Why ``plan``'s server cannot be launched here (None: it can, or it is attached by URL)."""
    if plan.backend is None or plan.backend.name is None:
        return None
    try:
        launches = check_launch(get_profile(plan.backend.name), plan.backend)
    except BackendError as exc:
        return str(exc)
    for launch in launches:
        if launch.argv and shutil.which(launch.argv[0]) is None:
            return f"{launch.argv[0]!r} not found: {_install_hint(launch.argv[0])}"
    return None


def check_prerequisites(plans: Sequence[ServerPlan]) -> None:
    """ExperimentError (bad input, exit 2) naming each entry that cannot start, before any cell."""
    problems = [f"{plan.label}: {why}" for plan in plans if (why := missing(plan)) is not None]
    if problems:
        raise ExperimentError(
            f"this machine cannot launch {len(problems)} of the experiment's servers, so nothing was run: "
            + "; ".join(problems)
        )
