"""`python -m store.cli ...`"""

import sys

from store.cli import main

sys.exit(main())
