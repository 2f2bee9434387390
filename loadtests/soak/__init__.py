"""The serving soak, `python -m loadtests.soak`: a sustained mixed load with bad requests on purpose, the
server's memory and counters sampled, one record in records/soak/ (usage: cli.py, loadtests/README.md).

- cli.py: the command's options and the run, from a ready server to the record
- requests.py: what is sent (good requests over the three models, bad requests that must be refused)
- workers.py: the client threads and the sampler, each answer judged and counted
- server.py: the server under soak and what is read from it (memory, Triton's statistics, ensembles)
- report.py: the record's figures from what was measured (no server in reach)
- page.py: the record written out: its JSON, page and chart, and the console's last lines
"""
