"""What a runtime accepts: operator schemas (onnx and onnxruntime contrib), runtime facts, the installed onnxruntime
(``installed``: its providers, kernels and IR), the target a conversion is for, the load check and its verdict, the
sessions users build (``usersession``), isolated runs."""
