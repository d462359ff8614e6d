"""The CANN kernels' loader searches the CANN libraries in op-plugin's order, on fake directory
layouts: the custom operator path, the vendors' load_priority, $ASCEND_HOME_PATH/lib64, then the
sonames, CANN's per-area libaclnn_*.so last; opens them RTLD_LAZY; an override replaces the order;
a miss lists every library tried."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_moe_onnx import ort_custom_ops

LOCATE = ("import ctypes, sys; f = ctypes.CDLL(sys.argv[1]).AscendMoeCannLocate; "
          "f.restype = ctypes.c_char_p; f.argtypes = [ctypes.c_char_p]; print(f(sys.argv[2].encode()).decode())")
SEARCH_ENV = ("ASCEND_CUSTOM_OPP_PATH", "ASCEND_OPP_PATH", "ASCEND_HOME_PATH", "ASCEND_MOE_CANN_LIBRARIES")


@pytest.fixture(scope="module")
def runtime() -> Path:
    for entry in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if entry and (Path(entry) / "libcust_opapi.so").is_file():
            return Path(entry)
    pytest.fail("the fake CANN runtime is not on LD_LIBRARY_PATH")


def locate(symbol: str, **env) -> str:
    """The loader's answer for ``symbol`` in a fresh process with ``env``."""
    full = {k: v for k, v in os.environ.items() if k not in SEARCH_ENV}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", LOCATE, ort_custom_ops.get_library_path(), symbol],
                         env=full, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def install(lib: Path, where: Path) -> Path:
    where.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(lib, where)
    return where


def test_custom_opp_path_entries_in_order(runtime, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    lib = install(runtime / "libcust_opapi.so", b / "op_api/lib/libcust_opapi.so")
    got = locate("aclnnMoeGatingTopKHash", ASCEND_CUSTOM_OPP_PATH=f"{a}:{b}")
    assert got == f"found in {lib}"


def test_vendors_by_load_priority(runtime, tmp_path):
    opp = tmp_path / "opp"
    for vendor in ("v1", "v2"):
        install(runtime / "libcust_opapi.so", opp / f"vendors/{vendor}/op_api/lib/libcust_opapi.so")
    (opp / "vendors/config.ini").write_text("# vendors\nload_priority = v2,v1\n")
    got = locate("aclnnMoeGatingTopKHash", ASCEND_OPP_PATH=str(opp))
    assert got == f"found in {opp}/vendors/v2/op_api/lib/libcust_opapi.so"
    # the custom path comes first
    custom = install(runtime / "libcust_opapi.so", tmp_path / "custom/op_api/lib/libcust_opapi.so")
    assert locate("aclnnMoeGatingTopKHash", ASCEND_OPP_PATH=str(opp),
                  ASCEND_CUSTOM_OPP_PATH=str(tmp_path / "custom")) == f"found in {custom}"


def test_home_lib64_before_sonames(runtime, tmp_path):
    lib = install(runtime / "libopapi.so", tmp_path / "home/lib64/libopapi_math.so")
    assert locate("aclnnMoeReRouting", ASCEND_HOME_PATH=str(tmp_path / "home")) == f"found in {lib}"
    assert locate("aclnnMoeReRouting") == "found in libopapi.so"
    assert locate("aclCreateTensor") == "found in libopapi.so"  # through its dependency libnnopbase.so


FEATURE_LIBRARIES = ("libaclnn_ops_infer.so", "libaclnn_ops_train.so", "libaclnn_math.so", "libaclnn_sparse.so",
                     "libaclnn_fft.so", "libaclnn_rand.so")  # op-plugin's GetOpApiFuncAddrFromFeatureLib


def test_miss_lists_every_library_tried(tmp_path):
    got = locate("aclnnMoeGatingTopKHash", ASCEND_CUSTOM_OPP_PATH=str(tmp_path / "none"))
    assert got.startswith("not found; tried: ")
    parts = (f"{tmp_path}/none/op_api/lib/libcust_opapi.so (", "libopapi.so (no aclnnMoeGatingTopKHash)",
             *(f"{lib} (" for lib in FEATURE_LIBRARIES), "libnnopbase.so (no aclnnMoeGatingTopKHash)",
             "libascendcl.so (no aclnnMoeGatingTopKHash)")
    positions = [got.index(part) for part in parts]
    assert positions == sorted(positions)  # in this order


def test_feature_libraries_last_resort(runtime, tmp_path):
    """A symbol libopapi.so lacks is taken from CANN's per-area operator libraries, in op-plugin's order."""
    install(runtime / "libcust_opapi.so", tmp_path / "libaclnn_math.so")
    install(runtime / "libcust_opapi.so", tmp_path / "libaclnn_rand.so")
    got = locate("aclnnMoeGatingTopKHash", LD_LIBRARY_PATH=f"{tmp_path}:{runtime}")
    assert got == "found in libaclnn_math.so"


def test_libraries_open_lazily(runtime, tmp_path):
    """A library with an unresolved function still serves its other symbols (RTLD_LAZY, as op-plugin)."""
    install(runtime / "loader-probe/liblazy_probe.so", tmp_path / "libaclnn_ops_infer.so")
    assert locate("aclnnLazyProbe", LD_LIBRARY_PATH=f"{tmp_path}:{runtime}") == "found in libaclnn_ops_infer.so"


def test_override_replaces_the_order(runtime, tmp_path):
    got = locate("aclnnMoeReRouting", ASCEND_MOE_CANN_LIBRARIES=f"{tmp_path}/x.so:{runtime}/libcust_opapi.so")
    assert got.startswith("not found; tried: ") and f"{tmp_path}/x.so (" in got
    assert "libcust_opapi.so (no aclnnMoeReRouting)" in got and "libopapi.so (" not in got.replace("cust_opapi", "")
    assert locate("aclnnMoeReRouting", ASCEND_MOE_CANN_LIBRARIES=f"{runtime}/libopapi.so") == \
        f"found in {runtime}/libopapi.so"
