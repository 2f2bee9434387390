"""NVIDIA's perf_analyzer against this project's server (`make perf`): input data generated from the
repository (data), where the binary runs from (tool), the sweep (sweep), the report (report), the command line
(cli)."""
