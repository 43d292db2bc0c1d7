"""``Number``, what every results type writes a measured number as: an int stays an int, so JSON
written through the types is the JSON computed. (Their base model is ``tokenbench.common.frozen.FrozenModel``.)"""

from __future__ import annotations

Number = int | float
