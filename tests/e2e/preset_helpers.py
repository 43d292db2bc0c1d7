"""Running a preset at ci scale for the end-to-end tests (test_presets.py, test_sessions_preset.py),
launching its servers, or attached to one a shared fixture launched with its knobs."""

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import yaml

from tokenbench.experiments import presets

ROOT = Path(__file__).resolve().parents[2]


def tokenbench(*args, timeout=1800):
    return subprocess.run(
        [sys.executable, "-m", "tokenbench", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def experiment(tmp_path_factory, preset):
    out = tmp_path_factory.mktemp(preset) / "exp"
    return _experiment(out, "--preset", preset, "--scale", "ci")


def attached_experiment(tmp_path_factory, preset, url, served_model_name):
    """The preset at ci scale, its one server attached at ``url`` (a server launched with the
    preset's knobs) instead of launched: its label, loads, variants and dataset as the preset has them."""
    with contextlib.chdir(ROOT):  # the preset finds the engines it launches from the repository root
        doc = presets.preset_data(preset, "ci")
    (entry,) = doc["backends"]
    attached = {"label": entry["label"], "backend": entry["backend"], "url": url}
    doc = {**doc, "backends": [{**attached, "served_model_name": served_model_name}]}
    base = tmp_path_factory.mktemp(preset)
    spec = base / f"{preset}.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    return _experiment(base / "exp", str(spec))


def _experiment(out, *spec):
    proc = tokenbench("experiment", "run", *spec, "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-4000:]
    state = json.loads((out / "experiment.json").read_text())
    assert state["complete"] is True
    return out, state
