"""``python -m tokenbench.results [PATH]``: rewrite schemas/results.schema.json from the types, and
schemas/capacity.schema.json beside it."""

import json
import sys
from pathlib import Path

from tokenbench.results import SCHEMA_PATH, schema
from tokenbench.results.capacity import capacity_schema

path = Path(sys.argv[1]) if len(sys.argv) > 1 else SCHEMA_PATH
path.parent.mkdir(parents=True, exist_ok=True)
for target, content in ((path, schema()), (path.parent / "capacity.schema.json", capacity_schema())):
    target.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {target}")
