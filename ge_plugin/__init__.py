"""The graph-engine (GE) ONNX parser plugin of the ascend.moe ops: C++ sources (``src/``) generated
from the schemas and GE's recorded operator IR (:mod:`.generate`, :mod:`.ge_ir`, :mod:`.mapping`),
built on an Ascend host against the installed CANN and installed as a vendor package, so that
``atc --framework=5`` and ONNX Runtime's CANN EP with ``enable_cann_graph=1`` read ascend.moe
nodes (docs/ascend.md). Nothing here is prebuilt: :func:`build` compiles, :func:`install` copies.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent
VENDOR = "ascend_moe"
LIBRARY_NAME = "libcust_onnx_parsers_ascend_moe.so"


class PluginError(RuntimeError):
    """A build or install step that cannot proceed (the message says which and why)."""


def ascend_home(explicit: str | os.PathLike | None = None) -> Path:
    """The CANN toolkit to build against: ``explicit``, else ``$ASCEND_TOOLKIT_HOME`` (set by CANN's
    set_env.sh), else ``$ASCEND_HOME_PATH``; a PluginError when none has include/register/register.h."""
    for candidate in (explicit, os.environ.get("ASCEND_TOOLKIT_HOME"), os.environ.get("ASCEND_HOME_PATH")):
        if candidate:
            home = Path(candidate)
            if (home / "include" / "register" / "register.h").is_file():
                return home
            raise PluginError(f"CANN toolkit '{home}' has no include/register/register.h (GE's register API)")
    raise PluginError("no CANN toolkit: source CANN's set_env.sh (ASCEND_TOOLKIT_HOME) or pass --ascend-home")


def build(build_dir: str | os.PathLike, ascend: str | os.PathLike | None = None, jobs: int = 2) -> Path:
    """Configure and build the plugin with CMake against CANN's headers and libraries; the .so."""
    home = ascend_home(ascend)
    build_dir = Path(build_dir)
    for cmd in (["cmake", "-S", str(SOURCE_DIR), "-B", str(build_dir), f"-DASCEND_HOME={home}"],
                ["cmake", "--build", str(build_dir), "-j", str(jobs)]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise PluginError(f"{' '.join(cmd)} failed:\n{(proc.stdout + proc.stderr)[-4000:]}")
    library = build_dir / LIBRARY_NAME
    if not library.is_file():
        raise PluginError(f"the build finished without {library}")
    return library


def _with_vendor_first(config: str, vendor: str) -> str:
    """vendors/config.ini with ``vendor`` first in ``load_priority`` (added once, others kept) and that
    line first in the file: GE's plugin loader reads only the first line."""
    priority, rest = [], []
    for line in config.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "load_priority":
            priority += [v.strip() for v in value.split(",") if v.strip() and v.strip() != vendor]
        else:
            rest.append(line)
    return "\n".join(["load_priority=" + ",".join([vendor, *priority]), *rest]) + "\n"


def install(library: str | os.PathLike, opp_path: str | os.PathLike | None = None, vendor: str = VENDOR,
            custom_opp_path: str | os.PathLike | None = None) -> Path:
    """Install a built plugin: into ``<opp>/vendors/<vendor>/framework/onnx/`` with ``vendor`` first in
    ``<opp>/vendors/config.ini`` (``opp`` defaults to ``$ASCEND_OPP_PATH``), or, with
    ``custom_opp_path``, into ``<custom_opp_path>/framework/onnx/`` (then list that folder in
    ``$ASCEND_CUSTOM_OPP_PATH``). Returns the installed file."""
    library = Path(library)
    if not library.is_file():
        raise PluginError(f"no plugin library at {library}: build it first (moe-onnx cann plugin build)")
    if custom_opp_path is not None:
        target = Path(custom_opp_path) / "framework" / "onnx"
    else:
        opp = opp_path or os.environ.get("ASCEND_OPP_PATH")
        if not opp:
            raise PluginError("no OPP folder: source CANN's set_env.sh (ASCEND_OPP_PATH) or pass --opp-path")
        if not Path(opp).is_dir():
            raise PluginError(f"OPP folder '{opp}' does not exist")
        if not vendor or "/" in vendor or "," in vendor:
            raise PluginError(f"vendor name {vendor!r} must be a plain folder name")
        vendors = Path(opp) / "vendors"
        target = vendors / vendor / "framework" / "onnx"
        config = vendors / "config.ini"
        vendors.mkdir(parents=True, exist_ok=True)
        config.write_text(_with_vendor_first(config.read_text() if config.is_file() else "", vendor))
    target.mkdir(parents=True, exist_ok=True)
    installed = target / LIBRARY_NAME
    shutil.copy2(library, installed)
    return installed
