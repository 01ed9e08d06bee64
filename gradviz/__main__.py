"""`python -m gradviz`: the same command line as `gradviz`."""

from .cli.command import main

if __name__ == "__main__":
    raise SystemExit(main(prog="python -m gradviz"))
