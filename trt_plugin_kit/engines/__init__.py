"""The engine builder behind ``build_engines.py``: ONNX models + model_repository/ -> TensorRT plans.

Modules, in the order a build uses them:

* :mod:`.cli` - arguments, the build loop, exit codes (``build_engines.py`` calls :func:`.cli.main`);
* :mod:`.plugin_config` - the plugin libraries to load (``--plugin-library``, ``--plugin-config``);
* :mod:`.precision` - how a requested precision is built on a TensorRT version (:class:`.PrecisionRecipe`);
* :mod:`.consistency` - ONNX graphs, TensorRT networks, engines and profiles against config.pbtxt;
* :mod:`.jobs` - one :class:`.BuildJob` per model and flavour, decided and checked before TensorRT is needed;
* :mod:`.tensorrt_api` - the one module that imports TensorRT (``tensorrt``, or ``tensorrt_rtx`` when asked);
* :mod:`.builder` - loading plugin libraries, network, builder config, timing cache, writing the plan;
* :mod:`.artifact_checks` - a container's TensorRT version in full, the library's links and creators, the
  serving image's check of the builder's artifacts (standard library only, runs in both images);
* :mod:`.progress` - the builder's progress bars; :mod:`.cuda_runtime` - CUDA through ctypes;
* :mod:`.verify` - ``--verify``: the engine on the sample digits, the validation split and the CPU reference.

"plan" means the serialized engine (``model.plan``) and nothing else.
"""
