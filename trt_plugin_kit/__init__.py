"""trt_plugin_kit: custom TensorRT plugins (IPluginV3) served by NVIDIA Triton.

Python side of the project: NumPy references of the plugin ops, the models (ONNX in plugin and
native flavours), and helpers shared by the serving code, the clients and the load tests.
"""

from trt_plugin_kit.interface import PLUGIN_NAMESPACE, PLUGIN_VERSION

__all__ = ["PLUGIN_NAMESPACE", "PLUGIN_VERSION"]
