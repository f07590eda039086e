import sys

from kchannel.cli import main

sys.exit(main())
