"""`python -m loadtests.baseline`, the command users type (the study: loadtests/studies/)."""

import sys

from loadtests.studies.baseline import main

if __name__ == "__main__":
    sys.exit(main())
