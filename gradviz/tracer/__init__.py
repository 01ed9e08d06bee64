"""The tracer: the only layer that touches torch. It records a program as a plain-data Trace."""

import torch

from ..torch_support import check

check(torch.__version__)  # (gradviz/__init__ checked the installed one: this is the one imported)

from .runner import trace, trace_module, trace_script

__all__ = ["trace", "trace_module", "trace_script"]
