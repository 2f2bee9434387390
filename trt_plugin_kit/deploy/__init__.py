"""Deployments beyond one host: the Kubernetes manifests' generator
(``python -m trt_plugin_kit.deploy.kubernetes``) and the balancer and replica slots of the compose failover
scenario."""
