"""The trace file (docs/trace-format.md): `write` writes the versioned JSON and lends `Trace` its JSON methods,
`decode` reads and checks it, `fields` is the layout both share, `checks` checks references and event data. A floor
of the trace model: every layer may import it."""

from . import write  # noqa: F401 - importing it lends the trace its JSON methods (model.LENT)
