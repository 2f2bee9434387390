"""Load tests of the Triton models with Locust, over HTTP and gRPC.

    python -m loadtests            (make loadtest)  headless run(s), reports, pass/fail thresholds
    loadtests/locustfile.py        the Locust users; also usable with `locust -f` directly
    loadtests/workloads.py         what is sent (real digits, vectors) and how answers are checked
    loadtests/report.py            Locust CSV -> summary.md/json, thresholds, charts
    loadtests/README.md            usage, container use, and how the baseline was measured
"""
