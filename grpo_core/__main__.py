"""``python -m grpo_core <experiment> ...``: the command line (``grpo_core.cli``)."""

import sys

from grpo_core.cli import main

sys.exit(main())
