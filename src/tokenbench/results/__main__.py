"""``python -m tokenbench.results [PATH]``: rewrite schemas/results.schema.json from the types."""

import json
import sys
from pathlib import Path

from . import SCHEMA_PATH, schema

path = Path(sys.argv[1]) if len(sys.argv) > 1 else SCHEMA_PATH
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text(json.dumps(schema(), indent=2) + "\n", encoding="utf-8")
print(f"wrote {path}")
