"""Reading a scaler's replicas: pure readers from its API's JSON to typed replica states
(``Replica``), and one poll of its URL as the sampler writes it (a ``replicas`` line of
samples.jsonl, on the run's monotonic clock, read back as results.scaling.ReplicaPoll). It runs in
the sampler's process, which imports no pydantic (results would add a second to its start).

Readers (``--scaler-kind``):
- ``ray-serve``: Ray Serve's instance details, the JSON the Ray dashboard answers at
  ``GET /api/serve/applications/`` (ray/dashboard/modules/serve/serve_head.py: the controller's
  ``get_serve_instance_details()``, ray/serve/schema.py ``ServeInstanceDetails``):
  ``applications.{app}.deployments.{name}`` with ``target_num_replicas`` and ``replicas[]``, each
  ``{"replica_id", "state", "start_time_s", ...}``; ``replica_id`` is the replica's unique id, the
  one ``serve.get_replica_context().replica_id.unique_id`` gives inside it. A replica's states
  (ray/serve/_private/common.py ``ReplicaState``): STARTING, UPDATING, RECOVERING, RUNNING, STOPPING
  (STOPPED and PENDING_MIGRATION are read as gone and as RUNNING: a stopped replica is no longer
  listed, and one pending migration still serves). The Ray profile's relay answers this JSON from
  its driver (backends/ray_serve_app.py: the dashboard is off), and the mock's scripted scaler too
  (mock/scaler.py). Every deployment's replicas are read, unless ``deployment`` names one.
- ``kubernetes``: a PodList (``GET /api/v1/namespaces/NS/pods?labelSelector=...``, e.g. through
  ``kubectl proxy`` on 127.0.0.1:8001, which needs no token here), optionally beside a Deployment's
  and an HPA's status. A pod's state (kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle):
  ``metadata.deletionTimestamp`` set: STOPPING (terminating; phase stays Running meanwhile);
  phase Succeeded or Failed: gone; condition Ready True: RUNNING; otherwise STARTING (Pending, or
  Running with containers not ready: PodScheduled, Initialized, ContainersReady not all True yet).
  ``desired``: the HPA's ``status.desiredReplicas``, else the Deployment's ``spec.replicas``.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from tokenbench.common.redact import mask_text
from tokenbench.common.replica_states import REPLICA_STATES, ReplicaState, ScalerKind

# Ray Serve states a listed replica may show that are not one of ours, and what they mean here
_RAY_ALIASES: dict[str, ReplicaState | None] = {"STOPPED": None, "PENDING_MIGRATION": "RUNNING"}


@dataclass(frozen=True)
class ScalerTarget:
    """A scaler's API the sampler polls: its URL and which reader its answer needs."""

    url: str
    kind: ScalerKind


class ScalerAnswerError(ValueError):
    """A scaler's answer is not the JSON its reader expects (names the key, and what to fix)."""


@dataclass(frozen=True)
class Replica:
    """One replica an answer lists: its id and its state."""

    id: str
    state: ReplicaState


@dataclass(frozen=True)
class ScalerView:
    """What one answer says: the replicas listed and the count the scaler wants (None: not said)."""

    replicas: list[Replica]
    desired: int | None


# Any: a scaler API's JSON, as it answered (the readers check each key they use)
def ray_serve_replicas(details: Mapping[str, Any], deployment: str | None = None) -> ScalerView:
    """Ray Serve's ``ServeInstanceDetails`` JSON -> its replicas (every deployment's, or one's)."""
    apps = details.get("applications")
    if not isinstance(apps, dict):
        raise ScalerAnswerError("a Ray Serve answer has an 'applications' object (GET /api/serve/applications/)")
    replicas: list[Replica] = []
    desired: int | None = None
    for app in apps.values():
        for name, dep in (app.get("deployments") or {}).items():
            if deployment is not None and name != deployment:
                continue
            target = dep.get("target_num_replicas")
            if isinstance(target, int):
                desired = (desired or 0) + target
            for r in dep.get("replicas") or []:
                state = _ray_state(r.get("state"))
                if state is not None:
                    replicas.append(Replica(id=str(r["replica_id"]), state=state))
    return ScalerView(replicas, desired)


def _ray_state(state: object) -> ReplicaState | None:
    for known in REPLICA_STATES:
        if state == known:
            return known
    if isinstance(state, str) and state in _RAY_ALIASES:
        return _RAY_ALIASES[state]
    raise ScalerAnswerError(f"a Ray Serve replica state {state!r} is none of {', '.join(REPLICA_STATES)}")


def kubernetes_replicas(
    pods: Mapping[str, Any], deployment: Mapping[str, Any] | None = None, hpa: Mapping[str, Any] | None = None
) -> ScalerView:
    """A PodList (the API's answer; ``kubectl get pods -o json`` prints it as kind List) and the
    Deployment's and HPA's objects, where given -> the pods as replicas."""
    items = pods.get("items")
    if pods.get("kind") not in (None, "PodList", "List") or not isinstance(items, list):
        raise ScalerAnswerError("a Kubernetes answer is a PodList ('items': [pods]): GET .../pods?labelSelector=...")
    replicas = [Replica(id=p["metadata"]["name"], state=s) for p in items if (s := pod_state(p)) is not None]
    desired: int | None = None
    if hpa is not None and isinstance((hpa.get("status") or {}).get("desiredReplicas"), int):
        desired = hpa["status"]["desiredReplicas"]
    elif deployment is not None and isinstance((deployment.get("spec") or {}).get("replicas"), int):
        desired = deployment["spec"]["replicas"]
    return ScalerView(replicas, desired)


def pod_state(pod: Mapping[str, Any]) -> ReplicaState | None:
    """A pod's state as a replica's (module docstring); None: it is gone (succeeded or failed)."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "STOPPING"
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return None
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    if status.get("phase") == "Running" and ready and ready[0].get("status") == "True":
        return "RUNNING"
    return "STARTING"


def pod_condition_times(pod: Mapping[str, Any]) -> dict[str, str]:
    """A pod's conditions that are True, with their ``lastTransitionTime`` (RFC 3339, the API
    server's clock): PodScheduled, Initialized, ContainersReady, Ready. Where a lag is split into
    scheduling and start-up, these say which part took the time (to the API server's second)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return {c["type"]: c["lastTransitionTime"] for c in conditions if c.get("status") == "True"}


def _kubernetes_answer(answer: Mapping[str, Any]) -> ScalerView:
    """One URL's answer: a PodList, or ``{"pods", "deployment", "hpa"}`` as a proxy may bundle them."""
    if "pods" in answer:
        return kubernetes_replicas(answer["pods"], answer.get("deployment"), answer.get("hpa"))
    return kubernetes_replicas(answer)


READERS: dict[ScalerKind, Callable[[Mapping[str, Any]], ScalerView]] = {
    "ray-serve": ray_serve_replicas,
    "kubernetes": _kubernetes_answer,
}


def poll_line(url: str, kind: ScalerKind, origin: float, timeout_s: float) -> dict[str, Any]:
    """One poll's ``replicas`` line (results.scaling.ReplicaPoll's fields): a failed poll is ``ok``
    false with its error, never fatal (a scaler's API may be down while it scales)."""
    t = time.perf_counter() - origin
    line: dict[str, Any] = {"kind": "replicas", "t_s": t, "source": f"{kind} {mask_text(url)}"}
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            view = READERS[kind](json.loads(resp.read()))
        line.update(ok=True, replicas=[asdict(r) for r in view.replicas], desired=view.desired)
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        line.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
    line["poll_s"] = time.perf_counter() - origin - t
    return line
