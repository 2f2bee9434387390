"""trt_plugin_kit: custom TensorRT plugins (IPluginV3) served by NVIDIA Triton.

Python side of the project: NumPy references of the plugin ops, the models (ONNX in plugin and
native flavours), and helpers shared by the serving code, the clients and the load tests.
"""

# The TensorRT plugin namespace every plugin of libtrt_plugin_kit.so registers under. ONNX nodes
# (attribute `plugin_namespace`), build scripts and docs use this exact string.
PLUGIN_NAMESPACE = "trt_plugin_kit"
PLUGIN_VERSION = "1"
