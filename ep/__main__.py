"""``torchrun --nproc-per-node N -m ascend_moe_onnx.ep PRESET [...]``: see ``ep.run``."""

import sys

from .run import main

sys.exit(main())
