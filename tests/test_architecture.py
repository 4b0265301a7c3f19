"""The code's shape, held by tests: the apps' and rooms' one-way rule (import-linter contracts
in .importlinter), no import cycles, no function-local imports that would hide one, a map in
docs/architecture.md that names every module, and long modules that say why they are. And the
tests' own: no test module imports another (what two of them share is in a helpers module)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("queueing", "events", "staff", "dashboard")
# The apps of the product, as docs/architecture.md maps them.
APPS = ("config", "dashboard", "staff", "queueing", "events")
# A module longer than this says in its docstring why (a sentence with "350 lines" in it).
LONG_MODULE_LINES = 350
# Django loads an app's checks when the app is ready: the one import that belongs in a function.
ALLOWED_LOCAL_IMPORTS = {("queueing/apps.py", "ready")}


def _cycles(graph: grimp.ImportGraph, modules: set[str]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[set[str]] = []
    counter = 0
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root) & modules)))]
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
                    imported = graph.find_modules_directly_imported_by(child) & modules
                    work.append((child, iter(sorted(imported))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_no_import_cycles_in_the_apps() -> None:
    graph = grimp.build_graph(*PACKAGES, "config")
    modules = {m for m in graph.modules if m.split(".")[0] in PACKAGES}
    assert _cycles(graph, modules) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for name in ("a", "b", "c"):
        graph.add_module(name)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="a")
    graph.add_import(importer="b", imported="c")
    assert _cycles(graph, {"a", "b", "c"}) == [{"a", "b"}]


def test_no_function_local_imports() -> None:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/migrations/" in relative:
                continue
            tree = ast.parse(path.read_text())
            for function in ast.walk(tree):
                if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(function):
                    if isinstance(node, (ast.Import, ast.ImportFrom)) and (
                        (relative, function.name) not in ALLOWED_LOCAL_IMPORTS
                    ):
                        found.append(f"{relative}:{node.lineno} in {function.name}()")
    assert found == []


def test_the_import_contracts_hold() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _product_modules() -> dict[str, set[str]]:
    """Each folder of the apps (``queueing/line/``) with the names of its modules."""
    found: dict[str, set[str]] = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if "migrations" in relative.parts or path.name == "__init__.py":
                continue
            found.setdefault(relative.parent.as_posix() + "/", set()).add(path.stem)
    return found


def _mapped_modules(text: str) -> dict[str, set[str]]:
    """The map in docs/architecture.md: the code block after ``<!-- house map -->``, a
    folder at the start of a line and its modules after it, continued on indented lines."""
    block = text.split("<!-- house map -->", 1)[1].split("```", 2)[1]
    mapped: dict[str, set[str]] = {}
    folder = None
    for line in block.splitlines():
        if not line.strip():
            continue
        head, *names = line.split()
        if not line.startswith(" "):
            folder = head
            mapped.setdefault(folder, set())
        else:
            names = [head, *names]
        assert folder is not None, f"a line of the map before any folder: {line!r}"
        mapped[folder].update(names)
    return mapped


def test_the_map_in_the_architecture_doc_names_every_module() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert _mapped_modules(text) == _product_modules()


def test_the_map_check_notices_a_missing_module() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    without = re.sub(r"(queueing/line/ +)joining ", r"\1", text, count=1)
    assert without != text
    assert _mapped_modules(without) != _product_modules()


def test_long_modules_say_why_at_their_top() -> None:
    unexplained = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            text = path.read_text()
            lines = text.count("\n")
            why = ast.get_docstring(ast.parse(text)) or ""
            if lines > LONG_MODULE_LINES and "350 lines" not in why:
                unexplained.append(f"{path.relative_to(ROOT)} ({lines} lines)")
    assert unexplained == []


def _test_module_imports(source: str, module: str) -> list[str]:
    """What the module ``module`` (dotted, ``tests.staff.test_api``) imports of a test module:
    a ``test_*`` module, or a ``test_*`` name from a package (which pytest would collect
    again), absolute or relative; each as ``line: tests.x.test_y``."""
    package = module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            origin = ".".join([*base, *([node.module] if node.module else [])])
            if any(part.startswith("test_") for part in origin.split(".")):
                names = [origin]
            else:
                names = [f"{origin}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [
            f"{node.lineno}: {name}"
            for name in names
            if any(part.startswith("test_") for part in name.split("."))
        ]
    return found


def test_no_test_module_imports_another() -> None:
    found = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        relative = path.relative_to(ROOT)
        module = ".".join(relative.with_suffix("").parts)
        found += [f"{relative}:{hit}" for hit in _test_module_imports(path.read_text(), module)]
    assert found == []


def test_the_test_import_check_finds_test_modules_imported() -> None:
    source = "\n".join(
        [
            "from tests.helpers import join",
            "from tests.staff.test_api import forbidden, WRITES",
            "import tests.events.test_catalogue",
            "from tests.dashboard import report_history, test_metrics",
            "from . import test_admin",
            "from ..events.test_catalogue import GROUPS",
            "from .admin_forms import change_form_data",
        ]
    )
    assert _test_module_imports(source, "tests.staff.test_branding_preview") == [
        "2: tests.staff.test_api",
        "3: tests.events.test_catalogue",
        "4: tests.dashboard.test_metrics",
        "5: tests.staff.test_admin",
        "6: tests.events.test_catalogue",
    ]
