"""Load tests of the Triton models with Locust, over HTTP and gRPC (usage: loadtests/README.md).

- `python -m loadtests` (`make loadtest`): headless run(s), reports, pass/fail thresholds (runner.py)
- `python -m loadtests.baseline`: the per-request-type measurement in records/baseline/baseline-20261121.md
- `python -m loadtests.soak`: the serving soak (soak.py, soak_report.py; records in records/soak/)
- locustfile.py: the Locust users; also usable with `locust -f` directly
- options.py: the workload options, defined once for the runner, the locustfile and the soak
- workloads.py: what is sent (real digits, vectors) and how the answers are checked
- report.py: Locust statistics -> summary.md/json, threshold verdicts, charts
"""
