"""ctypes bridge to llama.cpp's ggml CPU backend: the MoE FFN of llama.cpp's ``build_moe_ffn`` on
weights quantized by ggml itself, for the peer benchmark (benchmarks/peer_experts.py).

Only the few ggml, ggml-backend and ggml-cpu functions the benchmark needs are declared, against
the headers of ggml 0.25.3 (the one llama-cpp-python 0.3.36 vendors; ``CHECKED_VERSION``); the
only struct whose fields are read is ``ggml_type_traits`` (``to_float``), and the only one passed
by value is ``ggml_init_params``. Tensors, graphs, buffers and backends stay opaque pointers.

Where the libraries come from (``library_dir``): an explicit directory, else the environment
variable ``GGML_LIB_DIR_ENV``, else the ``lib`` folder of an installed ``llama_cpp`` package
(``pip install ".[peer]"`` builds it from source: docs/benchmarks.md). Each must hold
``libggml-base.so``, ``libggml-cpu.so`` and ``libggml.so`` (a llama.cpp CMake build with shared
libraries puts them in ``build/bin``). ``HOW_TO_GET`` says so when none is found.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

CHECKED_VERSION = "0.25.3"
GGML_LIB_DIR_ENV = "ASCEND_MOE_GGML_LIB_DIR"
LIBRARIES = ("ggml-base", "ggml-cpu", "ggml")  # load order: each needs the ones before it
HOW_TO_GET = (
    "llama.cpp's ggml libraries were not found. Either install the optional peer (builds llama-cpp-python "
    "0.3.36 from source: 20-70 min on 2 cores): CMAKE_ARGS=\"-DGGML_NATIVE=ON -DLLAVA_BUILD=OFF "
    "-DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF\" .venv/bin/pip install "
    "--no-build-isolation -e \".[peer]\"; or point " + GGML_LIB_DIR_ENV + " (or --ggml-lib) at a llama.cpp "
    "build's library folder: git clone https://github.com/ggml-org/llama.cpp && cmake -S llama.cpp -B "
    "llama.cpp/build -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=ON && cmake --build llama.cpp/build -j --target ggml "
    "&& export " + GGML_LIB_DIR_ENV + "=$PWD/llama.cpp/build/bin"
)

# enum ggml_type (ggml.h)
TYPE_IDS = {"f32": 0, "q4_0": 2, "q5_0": 6, "q8_0": 8, "q4_K": 12, "i32": 26, "bf16": 30}
# values per block and bytes per block of each type (ggml-common.h's block structs; tested against
# ggml_row_size where ggml is installed): what a call reads, computed without ggml
BLOCK_BYTES = {"f32": (1, 4), "bf16": (1, 2), "q4_0": (32, 18), "q5_0": (32, 22), "q8_0": (32, 34),
               "q4_K": (256, 144)}
# llama.cpp's quantizer (llama-quant.cpp, tensor_type_fallback): a row whose length the 256-value
# super-block does not divide takes this type instead
FALLBACK = {"q4_K": "q5_0"}
REPACK_BUFFER = "CPU_REPACK"  # ggml-cpu's extra buffer type that repacks weights at load time
REPACKED_TYPES = ("q4_0", "q4_K")  # of TYPE_IDS, those ggml-cpu repacks on x86 (``repackable``)
TENSOR_ALIGNMENT = 64  # ggml's CPU buffers align tensors to 32 bytes; 64 keeps cache lines whole


class GgmlUnavailable(RuntimeError):
    """The ggml libraries cannot be found or loaded (the message says how to get them)."""


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


_TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.c_int64)


class _TypeTraits(ctypes.Structure):
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                ("from_float_ref", ctypes.c_void_p)]


_P, _I64, _SZ, _INT, _BOOL = ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t, ctypes.c_int, ctypes.c_bool
# name -> (restype, argtypes), as ggml.h / ggml-alloc.h / ggml-backend.h / ggml-cpu.h declare them
_FUNCTIONS = {
    "ggml_version": (ctypes.c_char_p, []),
    "ggml_init": (_P, [_InitParams]),
    "ggml_free": (None, [_P]),
    "ggml_tensor_overhead": (_SZ, []),
    "ggml_graph_overhead": (_SZ, []),
    "ggml_row_size": (_SZ, [_INT, _I64]),
    "ggml_nbytes": (_SZ, [_P]),
    "ggml_new_tensor_2d": (_P, [_P, _INT, _I64, _I64]),
    "ggml_new_tensor_3d": (_P, [_P, _INT, _I64, _I64, _I64]),
    "ggml_set_input": (None, [_P]),
    "ggml_set_output": (None, [_P]),
    "ggml_reshape_3d": (_P, [_P, _P, _I64, _I64, _I64]),
    "ggml_view_2d": (_P, [_P, _P, _I64, _I64, _SZ, _SZ]),
    "ggml_cont": (_P, [_P, _P]),
    "ggml_mul_mat": (_P, [_P, _P, _P]),
    "ggml_mul_mat_id": (_P, [_P, _P, _P, _P]),
    "ggml_swiglu_split": (_P, [_P, _P, _P]),
    "ggml_mul": (_P, [_P, _P, _P]),
    "ggml_add": (_P, [_P, _P, _P]),
    "ggml_new_graph": (_P, [_P]),
    "ggml_build_forward_expand": (None, [_P, _P]),
    "ggml_quantize_chunk": (_SZ, [_INT, _P, _P, _I64, _I64, _I64, _P]),
    "ggml_get_type_traits": (ctypes.POINTER(_TypeTraits), [_INT]),
    "ggml_gallocr_new": (_P, [_P]),
    "ggml_gallocr_alloc_graph": (_BOOL, [_P, _P]),
    "ggml_gallocr_free": (None, [_P]),
    "ggml_backend_alloc_ctx_tensors_from_buft": (_P, [_P, _P]),
    "ggml_backend_cpu_buffer_from_ptr": (_P, [_P, _SZ]),
    "ggml_backend_tensor_alloc": (_INT, [_P, _P, _P]),
    "ggml_backend_buffer_free": (None, [_P]),
    "ggml_backend_buft_name": (ctypes.c_char_p, [_P]),
    "ggml_backend_tensor_set": (None, [_P, _P, _SZ, _SZ]),
    "ggml_backend_tensor_get": (None, [_P, _P, _SZ, _SZ]),
    "ggml_backend_get_default_buffer_type": (_P, [_P]),
    "ggml_backend_graph_compute": (_INT, [_P, _P]),
    "ggml_backend_free": (None, [_P]),
    "ggml_backend_cpu_init": (_P, []),
    "ggml_backend_cpu_set_n_threads": (None, [_P, _INT]),
    "ggml_backend_cpu_reg": (_P, []),
    "ggml_backend_reg_dev_get": (_P, [_P, _SZ]),
    "ggml_backend_reg_get_proc_address": (_P, [_P, ctypes.c_char_p]),
    "ggml_cpu_has_avx512": (_INT, []),
    "ggml_cpu_has_avx512_vnni": (_INT, []),
    "ggml_cpu_has_avx512_bf16": (_INT, []),
    "ggml_cpu_has_avx_vnni": (_INT, []),
    "ggml_cpu_has_avx2": (_INT, []),
}


def _package_lib_dir() -> Path | None:
    """The ``lib`` folder of an installed llama_cpp package (found without importing it)."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "lib"


def _library_file(folder: Path, name: str) -> Path | None:
    found = sorted(glob.glob(str(folder / f"lib{name}.so*")), key=len) + \
        sorted(glob.glob(str(folder / f"lib{name}.dylib")))
    return Path(found[0]) if found else None


def library_dir(explicit: str | os.PathLike | None = None) -> Path | None:
    """The first folder holding all of ``LIBRARIES``: ``explicit``, ``$GGML_LIB_DIR_ENV``, the
    llama_cpp package's; None where none does."""
    env = os.environ.get(GGML_LIB_DIR_ENV)
    for folder in (explicit, env or None, _package_lib_dir()):
        if folder and all(_library_file(Path(folder), n) for n in LIBRARIES):
            return Path(folder)
    return None


class Ggml:
    """The loaded libraries with the declared functions as attributes (``g.ggml_init(...)``)."""

    def __init__(self, folder: str | os.PathLike | None = None):
        where = library_dir(folder)
        if where is None:
            tried = f" (not in {folder})" if folder else ""
            raise GgmlUnavailable(HOW_TO_GET + tried)
        self.folder = where
        try:
            self._libs = [ctypes.CDLL(str(_library_file(where, n)), mode=ctypes.RTLD_GLOBAL) for n in LIBRARIES]
        except OSError as e:
            raise GgmlUnavailable(f"cannot load ggml from {where}: {e}") from e
        for name, (restype, argtypes) in _FUNCTIONS.items():
            fn = next((getattr(lib, name) for lib in self._libs if hasattr(lib, name)), None)
            if fn is None:
                raise GgmlUnavailable(f"{where}: ggml lacks {name} (this bridge was checked against ggml "
                                      f"{CHECKED_VERSION})")
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name, fn)
        self.version = self.ggml_version().decode()
        self._extra = self._extra_buffer_types()

    def __getattr__(self, name: str) -> Any:
        # only reached for names __init__ did not set: the declared functions are attributes
        raise AttributeError(f"ggml function {name} is not declared in this bridge's _FUNCTIONS")

    def _extra_buffer_types(self) -> dict[str, int]:
        """name -> buffer type of the CPU device's extra buffer types (CPU_REPACK, AMX, ...)."""
        reg = self.ggml_backend_cpu_reg()
        dev = self.ggml_backend_reg_dev_get(reg, 0)
        addr = self.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_dev_get_extra_bufts")
        if not addr:
            return {}
        get = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)(addr)
        arr, out, i = get(dev), {}, 0
        while arr and arr[i]:
            out[self.ggml_backend_buft_name(arr[i]).decode()] = arr[i]
            i += 1
        return out

    def has_buffer_type(self, name: str) -> bool:
        """Whether the CPU device offers the extra buffer type ``name`` (e.g. CPU_REPACK)."""
        return name in self._extra

    def cpu_features(self) -> str:
        """The ggml-cpu build's relevant ISA features, as it reports them."""
        feats = [f for f in ("avx2", "avx_vnni", "avx512", "avx512_vnni", "avx512_bf16")
                 if getattr(self, f"ggml_cpu_has_{f}")()]
        return " ".join(feats) or "none of avx2 / avx512"

    def row_bytes(self, type_name: str, n: int) -> int:
        """Bytes of one row of ``n`` values of ``type_name``, as ggml computes them."""
        return int(self.ggml_row_size(TYPE_IDS[type_name], n))

    def quantize_rows(self, type_name: str, rows: np.ndarray, out: np.ndarray) -> None:
        """``rows`` (float32 [n, K], contiguous) quantized by ggml into ``out`` (uint8, n row_bytes)."""
        rows = np.ascontiguousarray(rows, np.float32)
        n, K = rows.shape
        if out.nbytes != n * self.row_bytes(type_name, K) or not out.flags.c_contiguous:
            raise ValueError(f"{type_name}: out must be {n} contiguous rows of {self.row_bytes(type_name, K)} bytes")
        self.ggml_quantize_chunk(TYPE_IDS[type_name], rows.ctypes.data, out.ctypes.data, 0, n, K, None)

    def to_float(self, type_name: str, data: np.ndarray, count: int) -> np.ndarray:
        """The first ``count`` values of ``data`` (ggml's bytes of ``type_name``) as float32, by
        ggml's type traits' ``to_float``."""
        if type_name == "f32":
            return data.view(np.float32)[:count].copy()
        fn = self.ggml_get_type_traits(TYPE_IDS[type_name]).contents.to_float
        if not fn:
            raise ValueError(f"ggml has no to_float for {type_name}")
        out = np.empty(count, np.float32)
        _TO_FLOAT(fn)(data.ctypes.data, out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), count)
        return out


def aligned_bytes(nbytes: int) -> np.ndarray:
    """A uint8 array of ``nbytes`` whose data starts at a multiple of TENSOR_ALIGNMENT."""
    raw = np.empty(nbytes + TENSOR_ALIGNMENT, np.uint8)
    skip = (-raw.ctypes.data) % TENSOR_ALIGNMENT
    return raw[skip:skip + nbytes]


@dataclass
class Projection:
    """One stacked projection in ggml's layout: ``experts`` matrices of ``rows`` x ``cols``
    (ggml ne = [cols, rows, experts]), quantized to ``type_name``, bytes in ``data``."""

    type_name: str
    experts: int
    rows: int
    cols: int
    data: np.ndarray  # uint8, experts * rows * row_bytes

    def expert(self, g: Ggml, e: int) -> np.ndarray:
        """Expert ``e``'s matrix dequantized by ggml (float32 [rows, cols])."""
        per = self.rows * row_bytes(self.type_name, self.cols)
        return g.to_float(self.type_name, self.data[e * per:(e + 1) * per], self.rows * self.cols) \
            .reshape(self.rows, self.cols)


def row_bytes(type_name: str, n: int) -> int:
    """Bytes of one row of ``n`` values of ``type_name`` (BLOCK_BYTES; n a multiple of its block)."""
    values, nbytes = BLOCK_BYTES[type_name]
    if n % values:
        raise ValueError(f"ggml type {type_name} holds rows of multiples of {values} values, not {n}")
    return n // values * nbytes


def projection_type(type_name: str, cols: int) -> str:
    """The type llama.cpp's quantizer gives a projection of ``type_name`` with rows of ``cols``
    values: ``type_name``, or its fallback where the block does not divide ``cols``."""
    if cols % BLOCK_BYTES[type_name][0] == 0:
        return type_name
    fallback = FALLBACK.get(type_name)
    if fallback is None or cols % BLOCK_BYTES[fallback][0] != 0:
        raise ValueError(f"ggml type {type_name} cannot hold rows of {cols} values")
    return fallback


def repackable(g: Ggml, p: Projection) -> bool:
    """Whether ggml-cpu repacks ``p`` in its CPU_REPACK buffer on this machine: its x86 rule
    (ggml-cpu/repack.cpp, ggml_repack_get_optimal_repack_type) for the types this bridge uses, 8-row
    interleaved q4_0 and q4_K blocks with AVX2, where the rows come in multiples of 8. llama.cpp's
    loader leaves every other weight in the plain CPU buffer."""
    return p.type_name in REPACKED_TYPES and bool(g.ggml_cpu_has_avx2()) and p.rows % 8 == 0


def quantize_stack(g: Ggml, type_name: str, mats, experts: int, rows: int, cols: int) -> Projection:
    """``mats(e)`` (float32 [rows, cols] of expert e, e < experts) quantized by ggml, one expert at a
    time (no float copy of the whole stack)."""
    t = projection_type(type_name, cols)
    per = rows * row_bytes(t, cols)
    data = aligned_bytes(experts * per)
    for e in range(experts):
        g.quantize_rows(t, mats(e), data[e * per:(e + 1) * per])
    return Projection(t, experts, rows, cols, data)


class MoeFfn:
    """llama.cpp's MoE FFN on ggml's CPU backend over routed experts (gate, up, down projections,
    each a Projection of E experts) and optionally one shared expert (a plain FFN added after),
    with the weights either read in place (ggml's plain CPU buffer over the Projection's bytes)
    or repacked at load time into ``REPACK_BUFFER`` (``repack``).

    ``graph(x, ids, weights)`` builds one call's graph, inputs copied in once; ``compute(graph,
    threads)`` runs it; ``output(graph)`` reads y [T, H].
    """

    def __init__(self, g: Ggml, gate: Projection, up: Projection, down: Projection,
                 shared: tuple[Projection, Projection, Projection] | None = None, repack: bool = False,
                 threads: tuple[int, ...] = (1,)):
        if repack and not g.has_buffer_type(REPACK_BUFFER):
            raise GgmlUnavailable(f"this ggml build has no {REPACK_BUFFER} buffer type")
        self.g, self.repack = g, repack
        self.hidden, self.inter, self.experts = gate.cols, gate.rows, gate.experts
        self.shared = shared is not None
        self.projections = (gate, up, down) + (shared or ())
        self._buffers: list[int] = []
        self._contexts = [g.ggml_init(_InitParams(g.ggml_tensor_overhead() * 8, None, True)) for _ in range(2)]
        # routed experts stacked [cols, rows, E] (mul_mat_id), the shared expert 2-D (mul_mat)
        self.repacked = [repack and repackable(g, p) for p in self.projections]
        self.tensors = [self._new_weight(self._contexts[int(r)], p, i < 3)
                        for i, (p, r) in enumerate(zip(self.projections, self.repacked))]
        self._place_weights()
        self.backends = {n: g.ggml_backend_cpu_init() for n in threads}
        for n, b in self.backends.items():
            g.ggml_backend_cpu_set_n_threads(b, n)
        self._graphs: list[_Graph] = []

    def _new_weight(self, ctx: int, p: Projection, stacked: bool) -> int:
        t = TYPE_IDS[p.type_name]
        if stacked:
            return self.g.ggml_new_tensor_3d(ctx, t, p.cols, p.rows, p.experts)
        return self.g.ggml_new_tensor_2d(ctx, t, p.cols, p.rows)

    def _place_weights(self) -> None:
        g = self.g
        if any(self.repacked):
            # one repack buffer for the repacked context; set_tensor repacks each tensor as it copies
            buf = g.ggml_backend_alloc_ctx_tensors_from_buft(self._contexts[1], g._extra[REPACK_BUFFER])
            if not buf:
                raise MemoryError("ggml could not allocate the repacked weights")
            self._buffers.append(buf)
        for t, p, r in zip(self.tensors, self.projections, self.repacked):
            if r:
                g.ggml_backend_tensor_set(t, p.data.ctypes.data, 0, g.ggml_nbytes(t))
                continue
            buf = g.ggml_backend_cpu_buffer_from_ptr(p.data.ctypes.data, p.data.nbytes)  # zero copy
            self._buffers.append(buf)
            status = g.ggml_backend_tensor_alloc(buf, t, p.data.ctypes.data)
            if status != 0:
                raise RuntimeError(f"ggml_backend_tensor_alloc failed with status {status}")

    def graph(self, x: np.ndarray, ids: np.ndarray, weights: np.ndarray) -> _Graph:
        """One call: x float32 [T, H], ids [T, k] of routed experts, weights float32 [T, k]."""
        gr = _Graph(self, np.ascontiguousarray(x, np.float32), np.ascontiguousarray(ids, np.int32),
                    np.ascontiguousarray(weights, np.float32))
        self._graphs.append(gr)
        return gr

    def compute(self, gr: _Graph, threads: int) -> None:
        """Run ``gr`` on the backend with ``threads`` threads."""
        status = self.g.ggml_backend_graph_compute(self.backends[threads], gr.graph)
        if status != 0:
            raise RuntimeError(f"ggml_backend_graph_compute failed with status {status}")

    def output(self, gr: _Graph) -> np.ndarray:
        """y [T, H] of the last compute of ``gr``."""
        y = np.empty((gr.tokens, self.hidden), np.float32)
        self.g.ggml_backend_tensor_get(gr.out, y.ctypes.data, 0, y.nbytes)
        return y

    def weight_bytes(self, experts: int) -> int:
        """Bytes of ``experts`` routed experts' gate/up/down weights plus the shared expert's."""
        per = sum(p.data.nbytes // p.experts for p in self.projections[:3])
        return experts * per + sum(p.data.nbytes for p in self.projections[3:])

    def close_graphs(self) -> None:
        """Free the graphs ``graph`` built (and their compute buffers)."""
        for gr in self._graphs:
            gr.close()
        self._graphs = []

    def close(self) -> None:
        """Free ggml's graphs, buffers, backends and contexts."""
        g = self.g
        self.close_graphs()
        for b in self.backends.values():
            g.ggml_backend_free(b)
        self.backends = {}
        for buf in self._buffers:
            g.ggml_backend_buffer_free(buf)
        self._buffers = []
        for ctx in self._contexts:
            g.ggml_free(ctx)
        self._contexts = []


class _Graph:
    """One call's graph (build_moe_ffn + the shared expert) and its compute buffer."""

    def __init__(self, ffn: MoeFfn, x: np.ndarray, ids: np.ndarray, weights: np.ndarray):
        g = ffn.g
        self.g = g
        T, H = x.shape
        k = ids.shape[1]
        self.tokens = T
        self.ctx = g.ggml_init(_InitParams(g.ggml_tensor_overhead() * (32 + 2 * k) + g.ggml_graph_overhead(),
                                           None, True))
        ctx, F32 = self.ctx, TYPE_IDS["f32"]
        xt = g.ggml_new_tensor_2d(ctx, F32, H, T)
        it = g.ggml_new_tensor_2d(ctx, TYPE_IDS["i32"], k, T)
        wt = g.ggml_new_tensor_3d(ctx, F32, 1, k, T)
        for t in (xt, it, wt):
            # inputs set once and computed on again and again: flagged as outputs too, so that the
            # allocator never reuses their memory for later nodes (it frees only non-outputs)
            g.ggml_set_input(t)
            g.ggml_set_output(t)
        gate, up, down = ffn.tensors[:3]
        cur = g.ggml_reshape_3d(ctx, xt, H, 1, T)
        u = g.ggml_mul_mat_id(ctx, up, cur, it)  # [I, k, T]
        gt = g.ggml_mul_mat_id(ctx, gate, cur, it)
        act = g.ggml_swiglu_split(ctx, gt, u)  # silu(gate) * up
        experts = g.ggml_mul_mat_id(ctx, down, act, it)  # [H, k, T]
        experts = g.ggml_mul(ctx, experts, wt)
        # the weighted sum over the k slots as build_moe_ffn writes it: views added one by one
        row, token = H * 4, H * k * 4  # nb[1], nb[2] of the contiguous f32 [H, k, T]
        out = g.ggml_view_2d(ctx, experts, H, T, token, 0)
        for i in range(1, k):
            out = g.ggml_add(ctx, out, g.ggml_view_2d(ctx, experts, H, T, token, i * row))
        if k == 1:
            out = g.ggml_cont(ctx, out)
        if ffn.shared:  # llama.cpp's build_ffn (LLM_FFN_SILU, LLM_FFN_PAR), added to the routed sum
            sg, su, sd = ffn.tensors[3:]
            s_act = g.ggml_swiglu_split(ctx, g.ggml_mul_mat(ctx, sg, xt), g.ggml_mul_mat(ctx, su, xt))
            out = g.ggml_add(ctx, out, g.ggml_mul_mat(ctx, sd, s_act))
        g.ggml_set_output(out)
        self.out = out
        self.graph = g.ggml_new_graph(ctx)
        g.ggml_build_forward_expand(self.graph, out)
        self.galloc = g.ggml_gallocr_new(g.ggml_backend_get_default_buffer_type(next(iter(ffn.backends.values()))))
        if not g.ggml_gallocr_alloc_graph(self.galloc, self.graph):
            raise MemoryError(f"ggml could not allocate the compute buffer of a {T}-token call")
        for t, a in ((xt, x), (it, ids), (wt, weights)):
            g.ggml_backend_tensor_set(t, a.ctypes.data, 0, a.nbytes)
        self._keep = (x, ids, weights)

    def close(self) -> None:
        if self.galloc:
            self.g.ggml_gallocr_free(self.galloc)
            self.g.ggml_free(self.ctx)
            self.galloc = self.ctx = None
