"""torch_npu's HCCL process-group API on a CPU gloo world: the communicator names MC2 code passes
as ``group_ep``.

Model code names its expert-parallel communicator through torch_npu's ``ProcessGroupHCCL``:
``group._get_backend(torch.device("npu")).get_hccl_comm_name(rank)``, then passes that string to
``npu_moe_distribute_dispatch_v2`` / ``combine_v2``. On CPU the group is a gloo group and no HCCL
backend exists. :class:`ProcessGroupHCCL` stands in for it over any ``torch.distributed`` group:
its name (the same on every rank of the group, as an HCCL communicator's) is registered so that
dispatch / combine given that name run over that group. :func:`use_gloo_as_hccl` makes the call
above work unchanged: it names torch's PrivateUse1 device ``npu`` as ``import torch_npu`` does, with
the device hooks and ``torch.npu`` module of torch_npu on a machine without an NPU (none available,
so torch keeps choosing the CPU), and answers ``ProcessGroup._get_backend`` for that device with the
group's twin. It changes torch process-wide, as torch_npu does, so it is opt-in (several-rank CPU
runs), never part of :func:`install`.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ._args import require
from .distribute_ranks import register_group

COMM_NAME_MAX_LENGTH = 128  # torch_npu's bound: a name has 1 to 127 characters
NPU = "npu"


class ProcessGroupHCCL:
    """What ``group._get_backend(torch.device("npu"))`` gives model code, over ``group`` (gloo on CPU):
    ``get_hccl_comm_name`` / ``_set_hccl_comm_name`` with torch_npu's rules (op-plugin's
    ``ProcessGroupHCCL::getHcclCommName`` / ``setHcclCommName``)."""

    def __init__(self, group: dist.ProcessGroup):
        self._group = group
        self._name = ""          # set by _set_hccl_comm_name, else chosen when the communicator starts
        self._started = False    # torch_npu creates the communicator on the first named get

    def get_hccl_comm_name(self, rankid: int, init_comm: bool = True) -> str:
        """The communicator's name, the same on every rank of the group; ``init_comm=False`` before
        the communicator exists gives ``""`` (torch_npu's answer)."""
        fn = "ProcessGroupHCCL.get_hccl_comm_name"
        require(isinstance(rankid, int) and rankid >= 0, fn, "rankid", "must be an int >= 0", rankid)
        if not init_comm and not self._started:
            return ""
        if not self._name:
            self._name = f"gloo_group_{self._group.group_name}"
        register_group(self._name, self._group)
        self._started = True
        return self._name

    def _set_hccl_comm_name(self, hccl_comm_name: str) -> None:
        """Name the communicator before it starts; the same name again is accepted, another refused."""
        fn = "ProcessGroupHCCL._set_hccl_comm_name"
        require(isinstance(hccl_comm_name, str) and 0 < len(hccl_comm_name) < COMM_NAME_MAX_LENGTH, fn,
                "hccl_comm_name", f"must have 1 to {COMM_NAME_MAX_LENGTH - 1} characters", hccl_comm_name)
        require(not self._name or self._name == hccl_comm_name, fn, "hccl_comm_name",
                lambda: f"cannot rename the communicator, already named '{self._name}'", hccl_comm_name)
        self._name = hccl_comm_name


class _NoNpuHooks(torch._C._acc.PrivateUse1Hooks):
    """torch_npu's device hooks where no NPU is present: built, none available."""

    def is_available(self) -> bool:
        return False

    def has_primary_context(self, dev_id) -> bool:
        return False

    def is_built(self) -> bool:
        return True


class _NoNpuModule:
    """``torch.npu`` where no NPU is present (what torch asks of a device module)."""

    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def is_initialized() -> bool:
        return False

    @staticmethod
    def device_count() -> int:
        return 0

    @staticmethod
    def _is_in_bad_fork() -> bool:
        return False


_TWINS: dict[int, tuple[dist.ProcessGroup, ProcessGroupHCCL]] = {}


def hccl_backend(group: dist.ProcessGroup) -> ProcessGroupHCCL:
    """The one :class:`ProcessGroupHCCL` of ``group`` (created on first use)."""
    held = _TWINS.get(id(group))
    if held is None or held[0] is not group:
        held = (group, ProcessGroupHCCL(group))
        _TWINS[id(group)] = held   # the group is held, so its id is not reused
    return held[1]


def use_gloo_as_hccl() -> None:
    """Make ``group._get_backend(torch.device("npu"))`` give :func:`hccl_backend` of the group for
    groups with no backend of their own on that device (module docstring). Idempotent; refuses if
    torch's PrivateUse1 device already has another name."""
    current = torch._C._get_privateuse1_backend_name()
    if current != NPU:
        require(current == "privateuseone", "use_gloo_as_hccl", "PrivateUse1 device",
                f"must be unnamed (it becomes '{NPU}')", current)
        torch.utils.rename_privateuse1_backend(NPU)
        # torch then asks the device's hooks which accelerator is present (barrier, export)
        torch._C._acc.register_python_privateuseone_hook(_NoNpuHooks())
        if not hasattr(torch, NPU):
            torch._register_device_module(NPU, _NoNpuModule())
    original = dist.ProcessGroup._get_backend
    if getattr(original, "_gloo_as_hccl", False):
        return

    def _get_backend(self, device):
        try:
            return original(self, device)
        except RuntimeError:
            if torch.device(device).type != NPU:
                raise
            return hccl_backend(self)

    _get_backend._gloo_as_hccl = True  # type: ignore[attr-defined]
    dist.ProcessGroup._get_backend = _get_backend  # type: ignore[method-assign]


__all__ = ["ProcessGroupHCCL", "hccl_backend", "use_gloo_as_hccl"]
