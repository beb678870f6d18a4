"""The folder tree is the architecture: no import cycles, and every layer imports only what is below it.

The import graph is built from the source with `ast` (nothing is imported), over `store/`, `app/` and
`pages/`. An import inside a function counts like one at the top: a lazy import is still a dependency.
The rules are the ones docs/architecture.md states; a failure names the module and what it imported.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("store", "app", "pages")

# Rank of each part of the engine: a module may import modules of its own rank or lower, never higher.
# Same-rank imports are allowed (commit log and consume queue may share a helper) but the cycle test
# still holds them to a direction.
RANKS = [
    (0, ("store.errors", "store.kernel")),
    (1, ("store.codec",)),
    (2, ("store.mappedfile", "store.config", "store.config_table", "store.api")),
    (3, ("store.meta", "store.commitlog", "store.dledger", "store.consumequeue", "store.index",
         "store.timer")),
    (4, ("store.check", "store.recovery")),
    (5, ("store.services",)),
    (6, ("store", "store.message_store", "store.lookups", "store.inspect")),
    (7, ("store.tools", "store.cli", "store.pipeline")),
]
FACADE = ("store", "store.message_store", "store.api", "store.config", "store.errors", "store.inspect")
INTERNAL_ATTRIBUTES = {"commit_log", "consume_queues", "index_service", "mapped_files", "mapped_file",
                       "_parts", "parts"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:  # noqa: D103
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


MODULES = _modules()


def _imported_names(module: str, path: Path, tree: ast.AST) -> set[str]:
    """Every dotted name `module` imports (absolute form), internal or external."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                package = package[:len(package) - (node.level - 1)]
                base = ".".join(package + ([node.module] if node.module else []))
            else:
                base = node.module
            for alias in node.names:
                # `from store import kernel` depends on the module store.kernel, not on store's __init__
                submodule = f"{base}.{alias.name}"
                names.add(submodule if submodule in MODULES else base)
    return names


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    internal, external = {}, {}
    for module, path in MODULES.items():
        names = _imported_names(module, path, ast.parse(path.read_text(encoding="utf-8")))
        internal[module] = {name for name in names if name in MODULES and name != module}
        external[module] = {name for name in names if name not in MODULES}
    return internal, external


INTERNAL, EXTERNAL = _graph()


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph is a few hundred modules)."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def _rank(module: str) -> int | None:
    best, best_len = None, -1
    for rank, prefixes in RANKS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = rank, len(prefix)
    return best


def _within(module: str, *prefixes: str) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def test_graph_sees_the_whole_tree():
    assert "store.message_store" in MODULES and "app.main" in MODULES and "pages.overview" in MODULES
    assert INTERNAL["store.message_store"], "the graph found no imports: the parser is broken"


def test_no_import_cycles():
    assert _strongly_connected(INTERNAL) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_engine_module_has_a_rank():
    unranked = [m for m in MODULES if m.startswith("store") and _rank(m) is None]
    assert unranked == []


def test_layers_import_only_downwards():
    upward = []
    for module, imported in INTERNAL.items():
        if not module.startswith("store"):
            continue
        for name in imported:
            if _rank(name) > _rank(module):
                upward.append(f"{module} (rank {_rank(module)}) imports {name} (rank {_rank(name)})")
    assert upward == []


def test_codecs_import_only_codecs_the_kernel_and_errors():
    bad = [(m, n) for m, names in INTERNAL.items() if _within(m, "store.codec")
           for n in names if not _within(n, "store.codec", "store.kernel", "store.errors")]
    assert bad == []


def test_kernel_imports_nothing_of_the_store():
    bad = [(m, n) for m, names in INTERNAL.items() if _within(m, "store.kernel")
           for n in names if not _within(n, "store.kernel")]
    assert bad == []


def test_engine_never_imports_the_ui():
    bad = [(m, n) for m, names in {**INTERNAL, **EXTERNAL}.items() if _within(m, "store")
           for n in names if _within(n, "streamlit", "app", "pages", "plotly")]
    assert bad == []


def test_only_the_pipeline_imports_pyspark():
    bad = [(m, n) for m, names in EXTERNAL.items() if _within(m, "store") and not _within(m, "store.pipeline")
           for n in names if _within(n, "pyspark")]
    assert bad == []


def test_services_never_import_the_facade():
    facade = ("store", "store.message_store", "store.inspect", "store.lookups", "store.tools")
    bad = [(m, n) for m, names in INTERNAL.items() if _within(m, "store.services", "store.recovery")
           for n in names if n == "store" or _within(n, *facade[1:])]
    assert bad == []


def test_pages_import_only_app_helpers_and_the_facade():
    bad = [(m, n) for m, names in INTERNAL.items() if _within(m, "pages")
           for n in names if not (_within(n, "app") or n in FACADE)]
    assert bad == []


def test_app_uses_the_facade_not_engine_internals():
    """app/ may use the facade, the codecs (pure byte formats) and the pipeline's runner entry points."""
    allowed = ("app", "store.codec", "store.pipeline", "store.tools") + FACADE
    bad = [(m, n) for m, names in INTERNAL.items() if _within(m, "app")
           for n in names if not _within(n, *allowed) and n not in FACADE]
    assert bad == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith(("app", "pages"))))
def test_ui_never_touches_store_internals(module):
    """No `store.commit_log`, `.consume_queues`, `.index_service` or mapped files in the UI: it goes
    through `store.inspect` (an attribute of that name on any object counts, to keep the rule simple)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    touched = sorted({f"line {node.lineno}: .{node.attr}" for node in ast.walk(tree)
                      if isinstance(node, ast.Attribute) and node.attr in INTERNAL_ATTRIBUTES})
    assert touched == []


def test_top_of_store_is_a_small_facade():
    top = sorted(p.name for p in (REPO / "store").iterdir() if p.suffix == ".py")
    assert len(top) <= 12, top


@pytest.mark.parametrize("package", sorted(str(p.parent.relative_to(REPO)) for p in
                                           (REPO / "store").rglob("__init__.py")))
def test_every_package_says_what_it_holds_and_may_import(package):
    source = (REPO / package / "__init__.py").read_text(encoding="utf-8")
    docstring = ast.get_docstring(ast.parse(source)) or ""
    assert len(docstring) > 80, f"{package}/__init__.py needs a docstring: what it holds, what it may import"
    if package != "store":
        assert "import" in docstring, f"{package}/__init__.py does not say what it may import"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_over_450_lines(module):
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= 450, f"{os.path.relpath(MODULES[module], REPO)} has {lines} lines"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _within(
    m, "store.services", "store.recovery", "store.commitlog", "store.consumequeue", "store.index",
    "store.meta", "store.check")))
def test_parts_and_services_hold_no_back_reference_to_the_store(module):
    """STYLE "no back-references": a part or a service is handed the parts and callables it needs;
    none keeps the facade (`self.store`) or reaches into the facade's services (`.services`)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found = sorted({f"line {node.lineno}: self.{node.attr}" for node in ast.walk(tree)
                    if isinstance(node, ast.Attribute) and node.attr in ("store", "services")
                    and isinstance(node.value, ast.Name) and node.value.id == "self"})
    assert found == []
