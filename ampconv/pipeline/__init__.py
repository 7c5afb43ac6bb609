"""The conversion pipeline: the opset stage, the attempt stages (rewrite, report, write and check), the repair of a
session users build that fails (``users_repair``) and the figures."""
