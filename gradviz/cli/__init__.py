"""The command line: `gradviz render`, `gradviz check`, `gradviz gallery`. `command.py` parses the arguments into one
typed `Options` (`options.py`, `runner_options.py`, `window_options.py`) and hands `render` and `check` to
`pipeline.py` (obtain the trace, diagnose, accept, write, print, exit status); `run.py` runs the program, `report.py`
prints, `formats.py` and `sarif.py` write findings for machines, `suppress.py` and `config.py` accept findings,
`ranks.py` and `rank_summary.py` merge torchrun's ranks, `terminal.py` and `errors.py` say things in one line.
Nothing is imported here: the notebook and the pytest plugin read the options without loading the command."""
