"""What README.md and docs/packaging.md state about the package, held to its sources: the extras
and the import parts to pyproject.toml, the library's exported symbols to ``nm -D``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PACKAGING = ROOT / "docs" / "packaging.md"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

pytestmark = pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file(), reason="needs the source tree")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _line(path: Path, prefix: str) -> str:
    """The one line of ``path`` that starts with ``prefix``."""
    lines = [line for line in path.read_text().splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, f"{path.name}: expected one line starting {prefix!r}, found {len(lines)}"
    return lines[0]


def _listed(line: str) -> list[str]:
    """The backticked items of a claim line after its lead-in, "<claim> (<notes>): `a`, `b`, ..."."""
    return re.findall(r"`([^`]+)`", line.split("): ", 1)[1])


def _table_column(path: Path, header: str) -> list[str]:
    """The first column (backticks stripped) of the Markdown table whose header row starts with ``header``."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1].strip().strip("`"))
    return rows


def test_readme_names_every_extra():
    extras = set(_pyproject()["project"]["optional-dependencies"])
    assert set(_listed(_line(README, "Extras"))) == extras


def test_packaging_doc_tables_every_extra_with_its_requirements():
    deps = _pyproject()["project"]["optional-dependencies"]
    assert sorted(_table_column(PACKAGING, "extra")) == sorted(deps)
    text = PACKAGING.read_text()
    for extra, reqs in deps.items():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{extra}` |"))
        for req in reqs:
            name = re.split(r"[<>=\[ ]", req, maxsplit=1)[0]
            shown = "ascend-moe-onnx" if name == "ascend-moe-onnx" else name
            assert shown in row, f"docs/packaging.md: extra {extra!r} does not name {name}"


def _parts() -> set[str]:
    packages = _pyproject()["tool"]["scikit-build"]["wheel"]["packages"]
    return {folder for folder in packages.values() if folder != "ascend_moe_onnx"}


def test_packaging_doc_names_every_import_part():
    assert set(_listed(_line(PACKAGING, "Import parts"))) == _parts()


def test_readme_layout_lists_every_import_part():
    listed = {row.rstrip("/") for row in _table_column(README, "path")}
    assert _parts() <= listed, sorted(_parts() - listed)


def _exported_symbols() -> list[str]:
    from ascend_moe_onnx import ort_custom_ops

    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("needs binutils' nm")
    out = subprocess.run([nm, "-D", "--defined-only", ort_custom_ops.get_library_path()],
                         capture_output=True, text=True, check=True).stdout
    return sorted(line.split()[-1] for line in out.splitlines() if line.split()[1:2] == ["T"])


def test_packaging_doc_names_every_exported_symbol():
    symbols = _exported_symbols()
    line = _line(PACKAGING, "Exported symbols")
    assert sorted(_listed(line)) == symbols
    count = f"Exported symbols ({len(symbols)}, "
    assert line.startswith(count), f"docs/packaging.md: the count is not {len(symbols)}"


_HISTORY = re.compile(r"issue +#?[0-9]+|issue-[0-9]+|round +[0-9]+|(this|previous|last) round|the issue", re.I)


def test_history_lives_only_in_the_changelog():
    """Code and docs describe the project as it is; how it got there is CHANGELOG.md's."""
    if not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split("\0")
    found = []
    for name in files:
        path = ROOT / name
        if not name or name == "CHANGELOG.md" or path == Path(__file__) or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        found += [f"{name}:{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1)
                  if _HISTORY.search(line)]
    assert found == []


def test_readme_speed_tables_are_the_committed_results():
    """The README's speed tables are rendered from benchmarks/results/headline.json (its date,
    machine and command included): `python -m ascend_moe_onnx.benchmarks.readme` rewrites them."""
    import json

    results = ROOT / "benchmarks" / "results" / "headline.json"
    if not results.is_file():
        pytest.skip("needs the source tree's benchmarks/results")
    from ascend_moe_onnx.benchmarks import readme

    assert readme.readme_block(README.read_text()) == readme.render(json.loads(results.read_text()))
