"""`python -m chatlab.cli`: the same as the `chatlab` command."""
import sys

from chatlab.cli import main

sys.exit(main())
