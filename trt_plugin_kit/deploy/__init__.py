"""Deployments beyond one host: the Kubernetes manifests' generator
(``python -m trt_plugin_kit.deploy.kubernetes``), the balancer and replica slots of the compose failover
scenario, the Debian roots made where no image registry can be reached (``debian_root``) and the host's
wheelhouse that offline builds install from (``wheelhouse``)."""
