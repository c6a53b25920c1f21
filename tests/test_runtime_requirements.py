"""The server's own code imports only what requirements.txt installs.

`make run` installs requirements.txt alone, while the tests run in a venv that also has
requirements-test.txt. A runtime module that imports a test-only package (it happened with
`httpx`) passes every test and fails `make run` on a fresh clone with ModuleNotFoundError.

This reads every import statement of runs/, agentui/ and manage.py (function-level ones too: a
lazy import fails just as surely, only later) and checks that each names the standard library,
the project itself, or a distribution that requirements.txt brings, directly or through the
dependencies of what it names (with their extras), as pip resolves them in this venv.
runs/engine/testing is included: it is test support, but the offline demo model runs on it.

agentui/settings.py names modules in strings too (INSTALLED_APPS, MIDDLEWARE, backends):
its dotted names whose first part an installed distribution provides count as imports.

Not counted: imports under `if TYPE_CHECKING:` (never run) and imports in a `try` whose
handler catches ImportError or ModuleNotFoundError (optional by design).
`.ci/check_make_run` is the end-to-end check: a venv from requirements.txt alone serving.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = [ROOT / "runs", ROOT / "agentui", ROOT / "manage.py"]
LOCAL = {"runs", "agentui"}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_lines(path: Path) -> Iterator[str]:
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            yield line


def runtime_distributions(requirements: Path) -> set[str]:
    """Canonical names of every distribution that installing `requirements` brings here."""
    environment = default_environment()
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [Requirement(line) for line in _requirement_lines(requirements)]
    while todo:
        requirement = todo.pop()
        key = (_canonical(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = metadata.requires(requirement.name) or []
        except metadata.PackageNotFoundError:
            continue  # not installed here: imports of it fail below as unknown
        for spec in requires:
            dependency = Requirement(spec)
            if dependency.marker is None or any(
                dependency.marker.evaluate({**environment, "extra": extra})
                for extra in {"", *requirement.extras}
            ):
                todo.append(dependency)
    return {name for name, _ in seen}


def _optional(node: ast.Try) -> bool:
    for handler in node.handlers:
        caught = handler.type
        names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        if any(
            isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError")
            for n in names
        ):
            return True
    return False


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_top_names(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(top-level package, line) of every absolute import that runs when its code runs."""
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _type_checking(node):
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Try) and _optional(node):
            todo.extend([*node.handlers, *node.orelse, *node.finalbody])
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0], node.lineno
        todo.extend(ast.iter_child_nodes(node))


DOTTED = re.compile(r"[A-Za-z_]\w*(\.\w+)*")


def dotted_strings(tree: ast.AST, known: set[str]) -> Iterator[tuple[str, int]]:
    """(first part, line) of the settings' strings that name an installed module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if DOTTED.fullmatch(node.value) and node.value.split(".")[0] in known:
                yield node.value.split(".")[0], node.lineno


def runtime_files() -> Iterator[Path]:
    for place in RUNTIME:
        yield from sorted(place.rglob("*.py")) if place.is_dir() else [place]


def problems(files: list[Path], allowed: set[str], root: Path = ROOT) -> list[str]:
    providers = metadata.packages_distributions()
    found = []
    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        names = set(imported_top_names(tree))
        if path.name == "settings.py":
            names |= set(dotted_strings(tree, set(providers)))
        for name, line in sorted(names, key=lambda x: (x[1], x[0])):
            if name in sys.stdlib_module_names or name in LOCAL or name == "__future__":
                continue
            dists = providers.get(name, [])
            if any(_canonical(d) in allowed for d in dists):
                continue
            where = f"{path.relative_to(root)}:{line}: import {name}"
            if dists:
                found.append(
                    f"{where} (from {', '.join(sorted(set(dists)))}, "
                    "which requirements.txt does not install)"
                )
            else:
                found.append(f"{where} (no installed distribution provides it)")
    return found


@pytest.fixture(scope="module")
def allowed() -> set[str]:
    return runtime_distributions(ROOT / "requirements.txt")


def test_runtime_code_imports_only_what_requirements_txt_installs(
    allowed: set[str],
) -> None:
    found = problems(list(runtime_files()), allowed)
    assert not found, "runtime imports that `make run` cannot satisfy:\n" + "\n".join(
        found
    )


def test_the_check_sees_a_test_only_package_and_what_requirements_txt_brings(
    allowed: set[str], tmp_path: Path
) -> None:
    # httpx: requirements-test.txt only; httpx2 and anyio: through the openai SDK; aiohttp's
    # multidict: a dependency's dependency; pytest imported lazily inside a function
    module = tmp_path / "module.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "import httpx2, anyio, multidict\n"
        "from httpx import Client\n"
        "if TYPE_CHECKING:\n"
        "    import mypy\n"
        "try:\n"
        "    import hypothesis\n"
        "except ImportError:\n"
        "    hypothesis = None\n"
        "def later():\n"
        "    import pytest\n"
    )
    settings = tmp_path / "settings.py"
    settings.write_text(
        'APPS = ["channels", "csp", "hypothesis.extra.django", "httpx"]\n'
    )
    found = problems([module, settings], allowed, root=tmp_path)
    assert [f.split(" (")[0] for f in found] == [
        "module.py:3: import httpx",
        "module.py:11: import pytest",
        "settings.py:1: import httpx",
        "settings.py:1: import hypothesis",
    ]
