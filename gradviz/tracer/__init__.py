"""The tracer: the only layer that touches torch. It records a program as a plain-data Trace."""

from .runner import trace, trace_module, trace_script

__all__ = ["trace", "trace_module", "trace_script"]
