"""`python -m loadtests.queue_signal`, the command users type (the study: loadtests/studies/)."""

import sys

from loadtests.studies.queue_signal import main

if __name__ == "__main__":
    sys.exit(main())
