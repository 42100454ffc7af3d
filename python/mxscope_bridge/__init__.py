"""MX Scope bridge: publish MXFP4 telemetry from PyTorch training over protocol v1."""
__version__ = "0.1.0"

from .bridge import Bridge  # noqa: E402
from .config import default_gemms, gemm_config, run_config  # noqa: E402
from .emulate import Emulation, emulate  # noqa: E402
from .layers import LinearLike  # noqa: E402
from .runloop import Run  # noqa: E402

__all__ = ["Bridge", "Emulation", "LinearLike", "Run", "emulate", "default_gemms", "gemm_config", "run_config", "__version__"]
