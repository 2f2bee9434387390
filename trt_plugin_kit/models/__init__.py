"""The models of the kit: LeNet-5 (definition, training), the MNIST data and its preprocessing, the ONNX
export
in both flavours (plugin nodes or standard operators) with its FP16/INT8 variants, and the ONNX evaluator that
runs the plugin flavour with the plugins' NumPy references.

``python -m trt_plugin_kit.models.train`` and ``python -m trt_plugin_kit.models.export`` are the commands.
"""
