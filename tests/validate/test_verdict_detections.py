"""Detection sets (issue 30, 2): boxes, scores and labels selected by NMS/TopK are matched as sets.

Compared by position, an NMS head failed every converter ("labels: exact
match: 228 of 300 element(s) differ", a count that changes with rounding
failed on its shape) while the same detections were there. The natures are
read from the graph (``natures.detection_natures``) and overridable per
output; matching is ``validate.detections``. The end-to-end tests convert two
hand-built heads (torchvision-style NMS outputs, a YOLO-style packed TopK
output) with ``ampconv.convert`` and check on 10 seeds that the verdict agrees
with the task metric: reference detections matched by converted ones with the
same label at IoU >= 0.5.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import ampconv
from ampconv.reading.prepare import infer_types
from ampconv.validation import ValidateOptions, validate
from ampconv.validation.criteria import default_criteria
from ampconv.validation.detections import judge_detections
from ampconv.validation.natures import Nature, output_natures

import validate_models as vm

SEEDS = range(10)


def _natures(proto: onnx.ModelProto, overrides=None) -> dict:
    model = ir.serde.deserialize_model(proto)
    infer_types(model)
    return output_natures(model, overrides)


# ---------------------------------------------------------------- natures from the graph


def test_nms_outputs_are_one_detection_set_with_the_nms_score_threshold():
    natures = _natures(vm.nms_detector(score_threshold=0.4))
    assert {name: n.role for name, n in natures.items()} == {"boxes": "boxes", "scores": "scores", "labels": "labels"}
    assert {n.group for n in natures.values()} == {"nms"}
    assert all(n.kind == "detections" and n.score_threshold == pytest.approx(0.4) for n in natures.values())


def test_a_packed_topk_output_is_read_by_its_columns():
    nature = _natures(vm.topk_detector())["detections"]
    assert (nature.kind, nature.role, nature.columns, nature.score_threshold) == ("detections", "packed",
                                                                                   (0, 1, 2, 3, 4, 5), None)


def test_a_topk_without_boxes_is_no_detection_set():
    # A classifier's top-4 probabilities: four wide, but what TopK itself returns is never boxes.
    graph = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["p"]), helper.make_node("TopK", ["p", "k"], ["top", "index"])],
        "top4", [helper.make_tensor_value_info("x", T.FLOAT, [2, 10])],
        [helper.make_tensor_value_info("top", T.FLOAT, [2, 4]), helper.make_tensor_value_info("index", T.INT64, [2, 4])],
        [numpy_helper.from_array(np.array([4], np.int64), "k")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert not any(n.kind == "detections" for n in _natures(model).values())


def test_natures_are_overridable_per_output():
    natures = _natures(vm.nms_detector(), {"scores": "probability"})
    assert natures["scores"].kind == "bounded" and natures["boxes"].kind == "detections"
    # A set whose boxes an override takes is no set any more: its other members are judged on their own.
    natures = _natures(vm.nms_detector(), {"boxes": "values"})
    assert natures["boxes"].kind == "values" and "scores" not in natures and "labels" not in natures


# ---------------------------------------------------------------- matching


MEMBERS = {
    "boxes": Nature("detections", "boxes", group="g", role="boxes", score_threshold=0.5),
    "scores": Nature("detections", "scores", group="g", role="scores", score_threshold=0.5),
    "labels": Nature("detections", "labels", group="g", role="labels", score_threshold=0.5),
}


def _set(count=20, seed=0):
    rng = np.random.default_rng(seed)
    corner = rng.uniform(0, 500, (count, 2))
    boxes = np.concatenate([corner, corner + rng.uniform(20, 80, (count, 2))], axis=1).astype(np.float32)
    return {"boxes": boxes, "scores": rng.uniform(0.6, 0.99, count).astype(np.float32),
            "labels": rng.integers(0, 5, count).astype(np.int64)}


def _judge(ref, conv):
    return judge_detections(MEMBERS, ref, conv, default_criteria("fp16"))["boxes"]


def test_the_same_detections_in_another_order_pass():
    ref = _set()
    order = np.random.default_rng(1).permutation(20)
    m = _judge(ref, {k: v[order] for k, v in ref.items()})
    assert m.passed and m.criterion == "detections"
    assert m.decided_by.startswith("detections: 20 of 20 clear reference detection(s) matched")


def test_a_detection_at_the_threshold_may_vanish_but_a_clear_one_may_not():
    ref = _set(count=10)
    ref["scores"][3] = 0.5004  # 4e-4 above NMS's 0.5: rounding alone may drop it
    keep = np.arange(10) != 3
    assert _judge(ref, {k: v[keep] for k, v in ref.items()}).passed
    ref["scores"][3] = 0.9  # one clear detection of ten lost: over the 5% allowed
    m = _judge(ref, {k: v[keep] for k, v in ref.items()})
    assert not m.passed and "9 of 10" in m.decided_by


def test_wrong_labels_or_moved_boxes_fail():
    ref = _set()
    assert not _judge(ref, {**ref, "labels": (ref["labels"] + 1) % 5}).passed
    moved = ref["boxes"] + np.float32(15.0)
    m = _judge(ref, {**ref, "boxes": moved})
    assert not m.passed and "1 - IoU" in m.decided_by


def _kept_another_anchor(ref, which):
    """``ref`` with the boxes ``which`` replaced by a neighbouring candidate's: shifted by a quarter of their
    width (IoU about 0.6 with the reference's), as NMS keeps another anchor's box when two score alike."""
    boxes = ref["boxes"].copy()
    width = boxes[which, 2] - boxes[which, 0]
    boxes[which, 0] += width / 4
    boxes[which, 2] += width / 4
    return {**ref, "boxes": boxes}


def test_a_few_boxes_kept_from_another_anchor_pass_but_many_do_not():
    """Issue 39: on the dynamo SSDLite every clear detection matched, yet p99 1 - IoU read 0.18 (two boxes of
    ~150 that NMS took from a neighbouring anchor, which rounding alone does: the floor model shows it at the
    same rate). As many boxes may move beyond the limit as detections may go unmatched (5%)."""
    ref = _set(count=150)
    two = _judge(ref, _kept_another_anchor(ref, [3, 70]))
    assert two.passed and "2 box(es) moved beyond 1 - IoU 0.1" in two.decided_by
    assert "150 of 150 clear reference detection(s) matched" in two.decided_by
    many = _judge(ref, _kept_another_anchor(ref, list(range(0, 150, 12))))  # 13 of 150: 8.7%
    assert not many.passed and "13 box(es) moved beyond 1 - IoU 0.1" in many.decided_by


def test_a_limit_on_the_boxes_member_sets_how_far_boxes_may_move():
    ref = _set(count=150)
    many = _kept_another_anchor(ref, list(range(0, 150, 12)))
    criteria = ValidateOptions(limits={"boxes": {"max": 0.5}}).criteria("fp16")[0]
    loose = judge_detections(MEMBERS, ref, many, criteria)["labels"]
    assert loose.passed and "limits 0.05 unmatched, 0.05 moved beyond 1 - IoU 0.5" in loose.decided_by
    other = ValidateOptions(limits={"scores": {"max": 0.5}}).criteria("fp16")[0]  # not the boxes: no effect
    assert not judge_detections(MEMBERS, ref, many, other)["boxes"].passed


def test_a_box_the_floor_takes_from_another_anchor_does_not_make_every_detection_unclear():
    """On SSDLite the floor model kept another anchor's box for one object (1 - IoU 0.49, score 0.98 -> 0.56):
    its score change set the margin to 0.84, no detection was clear, and the set passed as a weak check on
    no evidence. That pair's score is another anchor's, not a rounding of the reference's: it is left out."""
    ref = _set(count=150)
    floor = _kept_another_anchor(ref, [5])
    floor["scores"] = ref["scores"].copy()
    floor["scores"][5] -= np.float32(0.4)
    lost = {k: v[20:] for k, v in ref.items()}  # 20 of 150 clear detections gone
    m = judge_detections(MEMBERS, ref, lost, default_criteria("fp16"), floor)["boxes"]
    assert not m.passed and "130 of 150 clear reference detection(s) matched" in m.decided_by
    assert "weak check" not in m.decided_by


def test_boxes_that_all_drift_a_little_beyond_the_limit_fail():
    """Negative: a drift shared by every box is no swap: each moved box counts, and the set fails."""
    ref = _set(count=150)
    width = ref["boxes"][:, 2] - ref["boxes"][:, 0]
    drifted = ref["boxes"].copy()
    drifted[:, [0, 2]] += (width * 0.08)[:, None]  # 1 - IoU about 0.15 on every box
    m = _judge(ref, {**ref, "boxes": drifted})
    assert not m.passed and "150 box(es) moved beyond 1 - IoU 0.1" in m.decided_by


def test_one_label_swapped_at_a_near_tie_passes_but_many_do_not():
    ref = _set(count=40)
    one = ref["labels"].copy()
    one[0] = (one[0] + 1) % 5  # same box, same score: its two best classes scored alike
    m = _judge(ref, {**ref, "labels": one})
    assert m.passed and "1 with another label at a near tie" in m.decided_by
    many = ref["labels"].copy()
    many[:10] = (many[:10] + 1) % 5
    assert not _judge(ref, {**ref, "labels": many}).passed


# ---------------------------------------------------------------- converted heads, 10 seeds


def _convert(tmp_path, model, dtype, name):
    model.ir_version = vm.IR_VERSION
    src = str(tmp_path / f"{name}.onnx")
    onnx.save(model, src)
    dst = str(tmp_path / f"{name}.{dtype}.onnx")
    ampconv.convert(src, dst, ampconv.Config(dtype=dtype, overwrite=True))
    return src, dst


def _rows(outputs: dict, packed: bool):
    """(boxes, scores, labels) of one image, from separate outputs or a packed [1, K, 6] one."""
    if packed:
        d = outputs["detections"].reshape(-1, 6)
        return d[:, :4], d[:, 4], np.rint(d[:, 5]).astype(int)
    return outputs["boxes"], outputs["scores"], outputs["labels"]


def _task(ref: dict, conv: dict, packed: bool, cut: float) -> bool:
    """The task metric: of the reference detections scoring over ``cut`` + 0.01, at least 95% have a converted
    detection with the same label at IoU >= 0.5 (greedy, best score first), and as few converted ones are extra."""
    from ampconv.validation.detections import iou

    rb, rs, rl = _rows(ref, packed)
    cb, cs, cl = _rows(conv, packed)
    cut = cut if cut is not None else float(rs.min())
    wanted = np.flatnonzero(rs > cut + 0.01)
    overlaps = iou(rb.astype(float), cb.astype(float)) * (rl[:, None] == cl[None, :])
    taken, matched = set(), 0
    for i in wanted[np.argsort(-rs[wanted])]:
        free = [j for j in np.argsort(-overlaps[i]) if j not in taken and overlaps[i, j] >= 0.5]
        if free:
            taken.add(free[0])
            matched += 1
    extra = sum(1 for j in np.flatnonzero(cs > cut + 0.01) if j not in taken)
    return matched >= 0.95 * len(wanted) and extra <= 0.05 * max(len(wanted), 1)


def _verdicts(src, dst, packed, cut):
    from ampconv.numerics import runners

    rows, seen, original = [], {}, runners.Runner.run

    def run(self, sample, names=None):
        outputs = original(self, sample, names)
        seen[self.label] = outputs
        return outputs

    runners.Runner.run = run
    try:
        for seed in SEEDS:
            result = validate(src, dst, ValidateOptions(seed=seed, backend="emulate"))
            ref, conv = seen["reference model"], seen["converted model"]
            counts = (np.shape(next(iter(ref.values()))), np.shape(next(iter(conv.values()))))
            rows.append((result.passed, _task(ref, conv, packed, cut), result.outputs[0].decided_by, counts))
    finally:
        runners.Runner.run = original
    return rows


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_an_nms_head_agrees_with_the_task_on_every_seed(tmp_path, dtype):
    src, dst = _convert(tmp_path, vm.nms_detector(), dtype, "nms")
    rows = _verdicts(src, dst, False, 0.5)
    assert all(verdict and task for verdict, task, _, _ in rows), [r for r in rows if not (r[0] and r[1])]
    assert all(words.startswith("detections: ") for _, _, words, _ in rows)
    if dtype == "bf16":  # rounding changes how many detections NMS keeps: position could not compare them
        assert any(ref != conv for _, _, _, (ref, conv) in rows)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_a_packed_topk_head_agrees_with_the_task_on_every_seed(tmp_path, dtype):
    src, dst = _convert(tmp_path, vm.topk_detector(), dtype, "topk")
    rows = _verdicts(src, dst, True, None)
    assert all(verdict and task for verdict, task, _, _ in rows), [r for r in rows if not (r[0] and r[1])]


def test_a_broken_nms_head_fails_on_every_seed(tmp_path):
    src, dst = _convert(tmp_path, vm.nms_detector(), "fp16", "nms")
    model = onnx.load(dst)
    for node in model.graph.node:  # the labels come out one class off
        node.output[:] = ["labels_before" if o == "labels" else o for o in node.output]
    model.graph.initializer.append(numpy_helper.from_array(np.array(1, np.int64), "one"))
    model.graph.node.append(helper.make_node("Add", ["labels_before", "one"], ["labels"]))
    onnx.save(model, dst)
    rows = _verdicts(src, dst, False, 0.5)
    assert not any(verdict or task for verdict, task, _, _ in rows)


def test_an_override_makes_dense_outputs_one_set(tmp_path):
    # No selector in the graph: the user says what the outputs are, and they are matched as a set.
    src, dst = _convert(tmp_path, vm.nms_detector(), "fp16", "nms")
    overrides = {"boxes": "boxes", "scores": "scores", "labels": "labels"}
    result = validate(src, dst, ValidateOptions(backend="emulate", natures=overrides))
    assert result.passed and result.outputs[0].decided_by.startswith("detections: ")
    with pytest.raises(ampconv.errors.UsageError, match="unknown nature 'boxen'"):
        ValidateOptions(natures={"boxes": "boxen"})
