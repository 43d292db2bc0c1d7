"""The packages' import order (DEVELOPERS.md, "Layout"): a module imports only packages before its
own in ``ORDER``, and no modules import each other in a circle. Every import counts, the ones
inside functions and under TYPE_CHECKING too: a lazy import is still an arrow."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "tokenbench"

# The flow, leaves first: the settings, what is sent, how, when and from where, what a run
# writes, then what reads it after the fact, and the commands last.
ORDER = (
    "errors records common config results datasets telemetry metrics backends spans clients mock"
    " loadgen workers rundir imports console report run compare history capacity experiments model cli __main__"
).split()


def module_of(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_of(p): p for p in SRC.rglob("*.py")}


def imports(module: str) -> set[str]:
    """The tokenbench modules ``module`` imports (a name imported from a package counts as the
    submodule when there is one of that name)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        else:
            continue
        for name in names:
            while name not in MODULES and "." in name:
                name = name.rsplit(".", 1)[0]
            if name in MODULES and name != module:
                found.add(name)
    return found


# Inside a package, the order of its parts where it has one (its __init__ may import them all).
PART_ORDER = {"report": "chart_spec read sections render".split()}


def package(module: str) -> str:
    return module.split(".")[1] if "." in module else "tokenbench"


def rank(module: str) -> int:
    name = package(module)
    return -1 if name == "tokenbench" else ORDER.index(name.removesuffix(".py"))


def test_every_package_has_its_place_in_the_order() -> None:
    assert {package(m) for m in MODULES} - {"tokenbench"} <= set(ORDER)


def upward_imports() -> list[str]:
    return sorted(
        f"{m} imports {t}" for m in MODULES for t in imports(m) if package(t) != package(m) and rank(t) > rank(m)
    )


def test_no_package_imports_one_later_in_the_order() -> None:
    assert upward_imports() == []


def part(module: str) -> tuple[str, int] | None:
    """(package, rank of its part) for a module in a part of a package with a PART_ORDER."""
    parts = module.split(".")
    order = PART_ORDER.get(parts[1]) if len(parts) > 2 else None
    return (parts[1], order.index(parts[2])) if order and parts[2] in order else None


def test_no_part_of_a_package_imports_a_later_part() -> None:
    upward = []
    for m in MODULES:
        for t in imports(m):
            here, there = part(m), part(t)
            if here and there and here[0] == there[0] and there[1] > here[1]:
                upward.append(f"{m} imports {t}")
    assert upward == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    graph = {m: imports(m) for m in MODULES}
    circle: list[str] = []
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        circle = exc.args[1]
    assert circle == [], f"an import circle: {' -> '.join(circle)}"


def test_a_handful_of_loose_modules() -> None:
    loose = sorted(p.name for p in SRC.glob("*.py") if p.name not in {"__init__.py", "__main__.py"})
    assert len(loose) <= 6, loose
