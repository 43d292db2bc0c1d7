"""A name made from free text that is safe as a file or directory name, in a URL and as an HTML id:
an experiment's server labels and cell ids (directories under ``cells/``, keys of experiment.json)
and the report's chart ids (the PNG's file name, the div's id)."""

from __future__ import annotations

import re

MAX_CHARS = 80


def slug(text: str, *, keep: str = "._=-") -> str:
    """``text`` with each run of characters other than ASCII letters, digits and ``keep`` made one
    "-", no "-" at either end, at most ``MAX_CHARS`` characters; "x" when nothing is left. The
    default keeps what a label's ``key=value`` parts read by (``max_num_seqs=64``, ``t0.5``);
    ``keep=""`` leaves letters and digits only (``max_num_seqs`` -> ``max-num-seqs``)."""
    return re.sub(f"[^A-Za-z0-9{re.escape(keep)}]+", "-", text).strip("-")[:MAX_CHARS] or "x"
