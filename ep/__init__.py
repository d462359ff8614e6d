"""Expert parallelism across processes: an MoE layer whose experts are split over N ranks.

- ``artefacts``: the exported graphs of a layer (one router graph, one expert-side graph per rank)
  and the start-up consistency check;
- ``layer``: the run-time layer (ONNX Runtime sessions joined by ``all_to_all_single``);
- ``check``: the single-process plain-torch reference and the int8 dispatch error bound;
- ``run`` / ``__main__``: the launcher ``torchrun --nproc-per-node N -m ascend_moe_onnx.ep PRESET``;
- ``spawn``: start N local ranks without torchrun (tests, benchmark); ``bench``: the benchmark.
See docs/expert-parallel.md.
"""
