"""The package layers: each part may import only the parts below it,

    onnx_schemas <- {ort_custom_ops, ge_plugin} <- exporters <- models <- {hf, ep} <- benchmarks <- cli

(hf and ep are siblings: neither imports the other; the benchmarks time what hf exports). Every
import counts, also one inside a function: a lazy import is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"onnx_schemas": 0, "ort_custom_ops": 1, "ge_plugin": 1, "exporters": 2, "models": 3,
          "hf": 4, "ep": 4, "benchmarks": 5, "cli": 6}


def _imported_parts(path: Path, part: str, root: Path) -> list[tuple[int, str]]:
    """(line, part) for every import of another project part in the file at ``path``, which lies
    in ``part``; relative imports are resolved against the file's package."""
    package = list(path.relative_to(root).parent.parts)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                module = ".".join(["ascend_moe_onnx", *base, *([node.module] if node.module else [])])
                # ``from .. import models`` names a part in the imported names
                names = [module] if node.module or base else [f"{module}.{a.name}" for a in node.names]
            else:
                names = [node.module or ""]
                if node.module == "ascend_moe_onnx":
                    names = [f"ascend_moe_onnx.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            bits = name.split(".")
            if bits[0] == "ascend_moe_onnx" and len(bits) > 1 and bits[1] in LAYERS and bits[1] != part:
                found.append((node.lineno, bits[1]))
    return found


def layering_violations(root: Path = ROOT) -> list[str]:
    """One line per import of a part that is not below the importing part."""
    bad = []
    for part, rank in LAYERS.items():
        for path in sorted((root / part).rglob("*.py")):
            for line, other in _imported_parts(path, part, root):
                if LAYERS[other] >= rank:
                    bad.append(f"{path.relative_to(root)}:{line}: {part} imports {other} "
                               f"(allowed: {', '.join(p for p, r in LAYERS.items() if r < rank) or 'none'})")
    return bad


def test_every_part_imports_only_the_parts_below_it():
    assert layering_violations() == []


@pytest.mark.parametrize("source, expected", [
    ("from ascend_moe_onnx.models import experts\n", "exporters imports models"),
    ("def f():\n    from ascend_moe_onnx import hf\n", "exporters imports hf"),
    ("import ascend_moe_onnx.cli.main\n", "exporters imports cli"),
    ("from ..models import layers\n", "exporters imports models"),
])
def test_a_forbidden_import_is_reported(tmp_path, source, expected):
    """The check sees absolute, lazy and relative imports (a file planted in a copy of the layout)."""
    for part in LAYERS:
        (tmp_path / part).mkdir()
    (tmp_path / "exporters" / "bad.py").write_text(source)
    (tmp_path / "models" / "fine.py").write_text("from ascend_moe_onnx.exporters import export\n")
    violations = layering_violations(tmp_path)
    assert len(violations) == 1 and expected in violations[0], violations
