"""`python -m cyloop`: the `cyloop` command."""

import sys

from .cli import main

sys.exit(main())
