"""trt_plugin_kit: custom TensorRT plugins (IPluginV3) served by NVIDIA Triton.

Python side of the project: NumPy references of the plugin ops, the models (ONNX in plugin and
native flavours), and helpers shared by the serving code, the clients and the load tests. Each name has one
home, the module that defines it: the kit's shared names, ports and paths are trt_plugin_kit.interface's.
"""
