"""The conversion pipeline: the opset stage, the attempt stages (rewrite, report, write and check) and the figures."""
