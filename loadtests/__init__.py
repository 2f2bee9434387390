"""Load tests of the Triton models with Locust, over HTTP and gRPC (usage: loadtests/README.md).

The load test (`python -m loadtests`, `make loadtest`):
- runner.py: headless Locust run(s), reports, pass/fail thresholds
- options.py: the workload options, durations and user counts, defined once for every tool here
- locustfile.py: the Locust users; also usable with `locust -f` directly
- workloads.py: what is sent (real digits, vectors) and how the answers are checked
- report.py: Locust statistics -> summary.md/json, threshold verdicts, charts

Measurements, each writing one record (record.py) into records/<study>/:
- studies/: baseline (`python -m loadtests.baseline`), queue signal (`python -m loadtests.queue_signal`),
  failover (the compose test's)
- soak/: the serving soak (`python -m loadtests.soak`)
- record.py: the one record format: what was run, where, when, the figures
"""
