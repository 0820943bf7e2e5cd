"""The suite's bytecode where Python keeps it without $PYTHONDONTWRITEBYTECODE: imported by conftest.py first,
before anything it compiles.

This project's machines, CI's among them, set the variable. pytest then rewrites and compiles every test module
again on each run, in each worker, and each child process a test starts compiles embscope again: seconds of the
suite's CPU. The suite writes its bytecode beside the sources instead (__pycache__, which git ignores), for itself
and its children, as Python does without the variable. Not in a separate folder ($PYTHONPYCACHEPREFIX): Python then
reads no __pycache__ at all, so the first run compiled again the 4,800 modules of torch, transformers, scipy and
the rest that pip had compiled at install (in each worker and child that got there first: 12-18 s of the 105-115 s
of CPU of a fresh clone's first run, CI's one run)."""

from __future__ import annotations

import os
import sys

if sys.dont_write_bytecode:
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
