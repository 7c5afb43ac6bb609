"""What the opset upgrade and its warning ask of the policy: would a node go LOW at an opset that admits it?

Shared by the schema rule (``plan.hard``: its reason's hint) and the default
upgrade (``opset_upgrade``): a node the level table keeps float32 anyway
(black, unlisted at O1, ``--block-op``) never justifies an upgrade or a
warning naming an opset.
"""

from __future__ import annotations

from ampconv.policy import HIGH

# The words of a ``hard-schema`` reason (``plan.hard.schema``) when the node would convert at a later opset.
CONVERTS_LATER = "allowed from opset"


def stays_high(policy, op_type: str) -> bool:
    """Whether the level table keeps a default-domain ``op_type`` float32 whatever its opset admits."""
    if op_type in policy.blocked or f"ai.onnx::{op_type}" in policy.blocked:
        return True
    return policy.level != "O0" and policy.rule(policy.class_of("", op_type)) == HIGH
