"""The integrations use the core's public API only, and that API is whole and documented.

Public API: ``langmem_tiers`` itself and its documented collaborator packages ``langmem_tiers.errors``,
``langmem_tiers.summarizers`` and ``langmem_tiers.embedders`` (their submodules, such as
``langmem_tiers.summarizers.base``, are not). An integration imports from those four modules only, and only
the names they export; it reads no private (``_name``) attribute of a core object. Every exported name
resolves and carries a docstring (for a constant: the string literal after its assignment, which is what the
API reference shows).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
INTEGRATIONS = [
    ROOT / "integrations" / "langchain" / "langchain_langmem_tiers",
    ROOT / "integrations" / "llama_index" / "llama_index" / "memory" / "langmem_tiers",
]
PUBLIC = ("langmem_tiers", "langmem_tiers.errors", "langmem_tiers.summarizers", "langmem_tiers.embedders")
# Private attributes of third-party objects an integration must read, each with the reason. None may name
# an object of the core.
THIRD_PARTY_PRIVATE = {
    # langchain-chroma's Chroma keeps its chromadb client and collection private and has no accessor
    # (langchain-chroma 1.1); chroma_store_from_langchain needs both to share them with the recall index.
    ("adapters.py", "vectorstore._client"),
    ("adapters.py", "vectorstore._collection"),
}


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for package in INTEGRATIONS:
        for path in sorted(package.rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _exported(module_name: str) -> set[str]:
    """What a public module exports: its ``__all__``, or its public names when it has none (errors)."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is not None:
        return set(names)
    return {n for n in vars(module) if not n.startswith("_")}


def _core_imports(tree: ast.Module) -> Iterator[tuple[int, str, str | None]]:
    """(line, module, name) of every import from the core; name is None for ``import langmem_tiers...``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "langmem_tiers":
                    yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "langmem_tiers":
            for alias in node.names:
                yield node.lineno, node.module, alias.name


def _core_private_names() -> set[str]:
    """Every private attribute or member name the core defines (``self._x = ...``, ``def _x``, ``_X = ...``)."""
    names: set[str] = set()
    for path in (ROOT / "langmem_tiers").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _own_names(tree: ast.Module) -> set[str]:
    """Attribute and member names an integration module defines itself (its own privates may be read)."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            own.add(node.target.id)  # class-level fields (pydantic private attributes)
    return own


def test_integrations_import_only_the_public_api() -> None:
    exported = {m: _exported(m) for m in PUBLIC}
    problems = []
    for path, tree in _modules():
        for line, module, name in _core_imports(tree):
            where = f"{path.relative_to(ROOT)}:{line}"
            if module not in PUBLIC:
                problems.append(f"{where} imports from {module} (not public: use {', '.join(PUBLIC)})")
            elif name is not None and name != "*" and name not in exported[module]:
                problems.append(f"{where} imports {name} from {module}, which does not export it")
    assert not problems, "\n".join(problems)


def test_integrations_read_no_private_attribute_of_the_core() -> None:
    core_private = _core_private_names()
    problems = []
    for path, tree in _modules():
        own = _own_names(tree) | {n for p in path.parent.glob("*.py") for n in _own_names(ast.parse(p.read_text()))}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
                continue
            receiver = node.value
            if isinstance(receiver, ast.Name) and receiver.id in ("self", "cls"):
                continue  # the integration's own state
            if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and receiver.func.id == "super":
                continue  # a hook of the host framework's base class, overridden
            expression = ast.unparse(node)
            if (path.name, expression) in THIRD_PARTY_PRIVATE:
                continue
            if node.attr in core_private or node.attr not in own:
                problems.append(f"{path.relative_to(ROOT)}:{node.lineno} reads {expression}")
    assert not problems, "\n".join(problems)


def test_the_private_attribute_check_catches_a_core_internal() -> None:
    # The check above must fail on the accesses the integrations used to make.
    core_private = _core_private_names()
    assert {"_client", "_collection", "_ns_id", "_drivers"} <= core_private


def _docstring_of_binding(module_name: str, name: str, seen: frozenset[str] = frozenset()) -> str | None:
    """The docstring of ``name`` where ``module_name`` binds it: the string after its assignment, or, for
    a re-export, the docstring where the imported module binds it (classes and functions: their own)."""
    if module_name in seen:
        return None
    spec = importlib.util.find_spec(module_name)
    assert spec is not None, module_name
    assert spec.origin is not None, module_name
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    body_lists = [tree.body] + [n.body for n in ast.walk(tree) if isinstance(n, ast.If)]  # TYPE_CHECKING imports
    for body in body_lists:
        for i, node in enumerate(body):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                after = body[i + 1] if i + 1 < len(body) else None
                if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) \
                        and isinstance(after.value.value, str):
                    return after.value.value
                return None
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                return ast.get_docstring(node)
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        return _docstring_of_binding(node.module, alias.name, seen | {module_name})
    return None


def _public_names() -> list[tuple[str, str]]:
    return [(m, n) for m in PUBLIC for n in sorted(getattr(importlib.import_module(m), "__all__", ()))]


@pytest.mark.parametrize(("module_name", "name"), _public_names())
def test_every_exported_name_resolves_and_is_documented(module_name: str, name: str) -> None:
    module: ModuleType = importlib.import_module(module_name)
    obj = getattr(module, name)  # resolves (lazy names import here)
    if inspect.isclass(obj) or inspect.isfunction(obj):
        doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
        assert doc, f"{module_name}.{name} has no docstring"
        assert doc.strip(), f"{module_name}.{name} has an empty docstring"
        assert not doc.startswith(f"{obj.__name__}("), f"{module_name}.{name} has only the dataclass signature"
    else:
        doc = _docstring_of_binding(module_name, name)
        assert doc, f"{module_name}.{name} has no docstring after its assignment"
        assert doc.strip(), f"{module_name}.{name} has an empty docstring"


def test_the_four_public_modules_are_named_in_the_api_reference() -> None:
    # Every name the integrations import from the core is on an API reference page (mkdocs builds them).
    pages = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").rglob("*.md"))
    imported: set[tuple[str, str]] = set()
    for _, tree in _modules():
        imported |= {(m, n) for _, m, n in _core_imports(tree) if n is not None}
    missing = []
    for module, name in sorted(imported):
        if f"{module}.{name}" not in pages and f"- {name}\n" not in pages:
            missing.append(f"{module}.{name}")
    assert not missing, "not in the API reference (docs/): " + ", ".join(missing)


def test_the_memory_message_contract_matches_what_context_builds(tmp_path: Path) -> None:
    from langmem_tiers import TieredMemory, WordCounter, is_memory_message, is_memory_text

    with TieredMemory.open(tmp_path, session_id="s", embedder=False, counter=WordCounter()) as memory:
        memory.remember("Ada is vegetarian.", pinned=True)
        memory.add("user", "What should I cook tonight?")
        first, *rest = memory.context().messages
    assert is_memory_message(first)
    assert is_memory_message(dict(first.metadata))  # as an adapter carries it in a framework message
    assert is_memory_text("\n" + first.text)
    assert [m.text for m in rest] == ["What should I cook tonight?"]
    assert not any(is_memory_message(m) or is_memory_text(m.text) for m in rest)
