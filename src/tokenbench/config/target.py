"""The target as a run reaches it: ``ResolvedTarget``, the one type every part after the launch
holds. The settings (``TargetConfig``) leave open what the server decides; a run resolves those once,
before its first request (``run.resolve_target``), into this frozen, validated value, carried
unchanged to the workers and to the client: where the server is, the model requests name, the API,
whether usage comes on every chunk, the fields a constraint goes in, and which engine serves it."""

from __future__ import annotations

from typing import Any

from tokenbench.config import Api, TargetConfig


class ResolvedTarget(TargetConfig):
    """``TargetConfig`` with nothing left open: ``url``, ``model``, ``api`` and
    ``continuous_usage`` decided; ``structured_dialect`` set when --response-format was given
    (None: none asked for); ``backend`` the engine profile's name (``backends.PROFILES``; None: a
    server tokenbench knows nothing of); ``fresh`` a server started for this run, nothing cached;
    ``report_fields`` the request fields that ask the engine for its report of each reply
    (``Profile.report_fields``)."""

    url: str
    model: str
    api: Api
    continuous_usage: bool
    backend: str | None = None
    fresh: bool = False
    report_fields: dict[str, Any] = {}

    @classmethod
    def of(cls, settings: TargetConfig, **decided: Any) -> ResolvedTarget:
        """The settings with what the run decided, validated as a whole (a ``model_copy`` is not)."""
        return cls.model_validate({**settings.model_dump(), **decided})
