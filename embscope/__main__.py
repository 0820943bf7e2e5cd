"""The `embscope` command (console script and `python -m embscope`). Start-up makes only objects that live as long
as the process (modules, classes, the command's parser), so the collector is off until cli.main has built the
command: its passes over them during the imports are wasted work (about 4% of a `similarity` run)."""

import gc

gc.disable()  # cli.main turns it back on

from .cli import main  # after the collector is off

if __name__ == "__main__":
    main()
