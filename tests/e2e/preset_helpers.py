"""Running a preset at ci scale for the end-to-end tests (test_presets.py, test_sessions_preset.py)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tokenbench(*args, timeout=1800):
    return subprocess.run(
        [sys.executable, "-m", "tokenbench", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def experiment(tmp_path_factory, preset):
    out = tmp_path_factory.mktemp(preset) / "exp"
    proc = tokenbench("experiment", "run", "--preset", preset, "--scale", "ci", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-4000:]
    state = json.loads((out / "experiment.json").read_text())
    assert state["complete"] is True
    return out, state
