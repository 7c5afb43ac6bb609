"""What a runtime accepts: operator schemas (onnx and onnxruntime contrib), runtime facts, the load check and its verdict, isolated runs."""
