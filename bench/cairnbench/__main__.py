import sys

from cairnbench.cli import main

sys.exit(main())
