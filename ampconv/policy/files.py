"""One policy file given as a mixlist: a ``modify_mixlist`` file or, recognized by shape, an operator-info file."""

from __future__ import annotations

from pathlib import Path
from typing import Union

from ampconv.policy.jsonfile import load_json
from ampconv.policy.mixlist import MixList, mixlist_from_data
from ampconv.policy.opinfo import OpInfoFile, looks_like_op_info, op_info_from_data


def read_policy_file(path: Union[str, Path]) -> Union[MixList, OpInfoFile]:
    """Parse ``path`` once and read it as what it is (``opinfo.looks_like_op_info`` decides)."""
    data = load_json(path)
    if looks_like_op_info(data):
        return op_info_from_data(str(path), data)
    return mixlist_from_data(str(path), data)


__all__ = ["read_policy_file"]
