"""``python -m overdub``: trace, count or log a function you did not write (see ``docs/cli.md``)."""

import os
import sys

from ._cli import main

try:
    status = main()
except BrokenPipeError:  # the reader of our output went away (`... | head`): stop quietly
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
    status = 1
sys.exit(status)
