"""A replica's states as a scaler shows them: Ray Serve's words (ray/serve/_private/common.py
``ReplicaState``, the ones a live replica shows), which a Kubernetes pod's phase and conditions map
onto (telemetry/scaler.py). The scaler's readers (in the sampler's process, which imports no
pydantic) and the results types share them from here."""

from __future__ import annotations

from typing import Literal

ReplicaState = Literal["STARTING", "UPDATING", "RECOVERING", "RUNNING", "STOPPING"]
REPLICA_STATES: tuple[ReplicaState, ...] = ("STARTING", "UPDATING", "RECOVERING", "RUNNING", "STOPPING")
ScalerKind = Literal["ray-serve", "kubernetes"]  # which reader a scaler's answer needs (telemetry/scaler.py)
SCALER_KINDS: tuple[ScalerKind, ...] = ("ray-serve", "kubernetes")
