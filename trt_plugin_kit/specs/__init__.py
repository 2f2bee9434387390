"""The plugins' facts: each plugin folder's spec.yaml (the single source), the documents and C++ tables
derived from it, the ONNX nodes that use a plugin, and the NumPy references of the ops.

``python -m trt_plugin_kit.specs docs|cpp|list`` writes the derived outputs.
"""
