"""MC2 dispatch / combine of the torch_npu stand-in on several gloo ranks (tests/mc2_rank_worker.py):
each rank's dispatched rows against op-plugin's golden and its combined output against the
one-rank result (zero / copy experts included). 2 ranks always; 4 behind --full-size (slower on a
shared 2-core machine). Shared-expert ranks (tests/mc2_shared_rank_worker.py): every rank against a
dense reference, at 2 and 4 ranks; the refusals torch_npu makes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ascend_moe_onnx.ep.spawn import free_port
from ascend_moe_onnx.exporters import torch_npu as tn

ROOT = Path(__file__).resolve().parent.parent


def _run_ranks(ranks: int, timeout: float = 180.0, worker: str = "tests.mc2_rank_worker"
               ) -> list[subprocess.CompletedProcess]:
    port = free_port()
    procs = []
    for r in range(ranks):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(ranks), LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        procs.append(subprocess.Popen([sys.executable, "-m", worker], cwd=ROOT, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out = []
    for p in procs:
        try:
            so, se = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        out.append(subprocess.CompletedProcess(p.args, p.returncode, so, se))
    return out


def _check(ranks: int, worker: str = "tests.mc2_rank_worker", timeout: float = 180.0) -> None:
    results = _run_ranks(ranks, timeout, worker)
    for r, res in enumerate(results):
        assert res.returncode == 0, f"rank {r}:\n{res.stdout}\n{res.stderr[-3000:]}"
        assert f"rank {r} ok" in res.stdout, res.stdout


def test_two_gloo_ranks_match_op_plugins_golden_and_the_one_rank_result():
    _check(2)


@pytest.mark.full_size
def test_four_gloo_ranks_one_without_tokens():
    _check(4)


def test_several_ranks_refuse_what_they_do_not_carry():
    x, idx = torch.randn(4, 8), torch.tensor([[0, 1], [2, 3], [1, 0], [3, 2]], dtype=torch.int32)
    with pytest.raises(NotImplementedError, match="argument 'elastic_info'"):
        tn.npu_moe_distribute_combine_v2(x, idx, torch.zeros(1), torch.tensor([1]), torch.ones(4, 2), "ep", 2, 0, 4,
                                         elastic_info=torch.zeros(6, dtype=torch.int32))
    with pytest.raises(ValueError, match="argument 'copy_expert_num' must be an int >= 0"):
        tn.npu_moe_distribute_dispatch_v2(x, idx, "ep", 2, 0, 4, copy_expert_num=-1)


def test_shared_expert_ranks_match_a_dense_reference_at_two_ranks():
    """Rank 0 the shared expert, rank 1 every MoE expert: v2 float (each kind of rank's expert side
    exported and run in ONNX Runtime) and w8a8, v1, a mask."""
    _check(2, "tests.mc2_shared_rank_worker")


def test_shared_expert_ranks_match_a_dense_reference_at_four_ranks():
    """1 and 2 shared-expert ranks, 1 and 2 shared experts, float and w8a8, v2 and v1."""
    _check(4, "tests.mc2_shared_rank_worker", timeout=300.0)


V2, V1 = tn.npu_moe_distribute_dispatch_v2, tn.npu_moe_distribute_dispatch


@pytest.mark.parametrize(("fn", "n", "kwargs", "message"), [
    (V2, 4, dict(shared_expert_rank_num=4), r"'shared_expert_rank_num' must be in \[0, ep_world_size\) = \[0, 4\), got 4"),
    (V2, 4, dict(shared_expert_rank_num=-1), r"'shared_expert_rank_num' must be in \[0, ep_world_size\)"),
    (V2, 4, dict(shared_expert_num=5, shared_expert_rank_num=1), r"'shared_expert_num' must be in \[0, 4\], got 5"),
    (V2, 4, dict(shared_expert_num=2, shared_expert_rank_num=3),
     "'shared_expert_rank_num' must be a multiple of shared_expert_num=2"),
    (V2, 4, dict(shared_expert_num=0, shared_expert_rank_num=2), "'shared_expert_rank_num' must be a multiple"),
    (V2, 4, dict(shared_expert_num=2), "'shared_expert_num' must be 0 or 1 .none. with shared_expert_rank_num=0"),
    (V2, 4, dict(shared_expert_rank_num=1, moe_expert_num=8),
     "'moe_expert_num' must be a positive multiple of ep_world_size - shared_expert_rank_num = 3, got 8"),
    (V2, 4, dict(expert_shard_type=1, shared_expert_rank_num=1), "'expert_shard_type' must be 0"),
    (V1, 4, dict(shared_expert_num=2, shared_expert_rank_num=2), "'shared_expert_num' must be 1"),
    (V1, 4, dict(shared_expert_rank_num=3, moe_expert_num=4), "'shared_expert_rank_num' must divide ep_world_size=4"),
    (V2, 1, dict(shared_expert_rank_num=1), r"'shared_expert_rank_num' must be in \[0, ep_world_size\) = \[0, 1\)"),
])
def test_shared_expert_ranks_refuse_what_torch_npu_refuses(fn, n, kwargs, message):
    """torch_npu's rules (op-plugin's dispatch checks, ops-transformer's tiling), named by argument
    and value before any communication."""
    x, idx = torch.randn(4, 8), torch.tensor([[0, 1], [2, 3], [1, 0], [3, 2]], dtype=torch.int32)
    experts = kwargs.pop("moe_expert_num", 6)
    with pytest.raises(ValueError, match=message):
        fn(x, idx, "ep", n, 0, experts, **kwargs)


def test_combine_refuses_shared_expert_x_with_shared_expert_ranks():
    """ops-transformer moe_distribute_combine_v2_tiling.cpp: the shared-expert ranks compute the
    shared experts, so shared_expert_x must be None."""
    x, idx = torch.randn(4, 8), torch.tensor([[0, 1], [2, 3], [1, 0], [3, 2]], dtype=torch.int32)
    with pytest.raises(ValueError, match="argument 'shared_expert_x' must be None with shared_expert_rank_num > 0"):
        tn.npu_moe_distribute_combine_v2(x, idx, torch.zeros(128, dtype=torch.int32), torch.tensor([1]),
                                         torch.ones(4, 2), "ep", 2, 1, 4, shared_expert_x=x, shared_expert_rank_num=1)


def test_hccl_comm_name_follows_torch_npu():
    """ProcessGroupHCCL.get_hccl_comm_name / _set_hccl_comm_name as torch_npu's (its distributed
    tests): no name before the communicator starts with init_comm=False, one stable name after,
    a name set first is the one given, renaming refused."""
    from types import SimpleNamespace

    from ascend_moe_onnx.exporters.torch_npu import distribute_ranks
    from ascend_moe_onnx.exporters.torch_npu.hccl import ProcessGroupHCCL

    group = SimpleNamespace(group_name="7")
    pg = ProcessGroupHCCL(group)  # type: ignore[arg-type]
    assert pg.get_hccl_comm_name(0, init_comm=False) == ""
    name = pg.get_hccl_comm_name(1)
    assert name and pg.get_hccl_comm_name(0, init_comm=False) == name == pg.get_hccl_comm_name(1)
    assert distribute_ranks._GROUPS[name] is group
    with pytest.raises(RuntimeError, match="argument 'rankid' must be an int >= 0"):
        pg.get_hccl_comm_name(-1)
    with pytest.raises(RuntimeError, match="cannot rename the communicator"):
        pg._set_hccl_comm_name("other")
    named = ProcessGroupHCCL(SimpleNamespace(group_name="8"))  # type: ignore[arg-type]
    named._set_hccl_comm_name("moe_ep")
    named._set_hccl_comm_name("moe_ep")
    assert named.get_hccl_comm_name(0) == "moe_ep"
    for bad in ("", "x" * 128):
        with pytest.raises(ValueError, match="argument 'hccl_comm_name' must have 1 to 127 characters"):
            ProcessGroupHCCL(group)._set_hccl_comm_name(bad)  # type: ignore[arg-type]


def test_x_active_mask_as_torch_npu_takes_it():
    from ascend_moe_onnx.exporters.torch_npu.distribute_ranks import active_pairs

    ids = torch.zeros(3, 2, dtype=torch.int32)
    fn = "npu_moe_distribute_dispatch_v2"
    assert active_pairs(fn, None, ids) is None
    assert active_pairs(fn, torch.tensor([True, True, False]), ids).tolist() == [[True, True], [True, True],
                                                                               [False, False]]
    pairs = torch.tensor([[True, False], [False, False], [False, True]])
    assert torch.equal(active_pairs(fn, pairs, ids), pairs)
    with pytest.raises(ValueError, match="true entries before its false ones"):
        active_pairs(fn, torch.tensor([True, False, True]), ids)
    with pytest.raises(ValueError, match=r"argument 'x_active_mask' must be a bool tensor \[BS\] = \[3\]"):
        active_pairs(fn, torch.ones(3, dtype=torch.int32), ids)


def test_outputs_own_their_storage():
    """vllm-ascend's all-to-all dispatcher frees each buffer after sending it
    (``untyped_storage().resize_(0)``): the stand-in's outputs hold storage of their own and its
    inputs stay resizable, as with torch_npu."""
    x = torch.randn(4, 8)
    ids = torch.tensor([[0, 1], [2, 3], [1, 0], [3, 2]], dtype=torch.int32)
    permuted, order = tn.npu_moe_token_permute(x, ids, num_out_tokens=8)
    counts = torch.tensor([2, 2, 2, 2])
    y = tn.npu_grouped_matmul([permuted], [torch.randn(4, 8, 6)], group_list=counts, group_type=0,
                              group_list_type=1, split_item=3)[0]
    routed = tn.npu_moe_init_routing_v2(x, ids, active_num=8, expert_num=4, expert_tokens_num_type=1,
                                        expert_tokens_num_flag=True)
    for t in (x, ids, permuted, order, y, tn.npu_swiglu(torch.randn(3, 8)), *routed[:3]):  # inputs too
        t.untyped_storage().resize_(0)
        assert t.untyped_storage().nbytes() == 0
