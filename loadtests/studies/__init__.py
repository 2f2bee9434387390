"""The measurement studies: each runs the load test's Locust users (loadtests.runner) in a fixed design and
writes one record (loadtests/record.py) into records/<study>/.

- baseline.py (`python -m loadtests.baseline`): each request type alone at a few user counts
- queue_signal.py (`python -m loadtests.queue_signal`): the autoscaler's metric on one replica under load
- failover.py: replicas behind HAProxy, one killed under load (the failover step of `make compose-test`)
- quiet.py: waiting for a quiet machine before each run, and how busy it still was
"""
