"""How far an fp16 conversion moves SSDLite's boxes, against what rounding alone moves them (issue 39).

Usage:

- ``python scripts/ssdlite_boxes.py export --out DIR [--size 480x640] [--dynamo]``, in a separate venv with
  ``pip install torch==2.14.1 torchvision==0.29.1 onnx onnxscript`` (not a project dependency): torchvision's
  ``ssdlite320_mobilenet_v3_large`` with random but trained-like weights, exported to ``DIR``, with 8 images
  of that size in ``DIR/images_HxW``;
- ``python scripts/ssdlite_boxes.py measure MODEL.onnx CONVERTED.onnx IMAGES_DIR``, in the project's venv:
  per image, the clear detections matched, the p99 of 1 - IoU of the matched boxes for the conversion and for
  the floor model (``validation.floor``), and every matched box moved beyond 1 - IoU 0.1 with its scores.

Trained-like: BatchNorm statistics recalibrated on smooth images, the heads' last convolutions scaled so class
logits have std 3 and box codes std 1, and the background logit raised by 7 so most anchors are background
(about 100 to 200 detections score over 0.3, as a trained SSDLite shows on a busy image). ``--dynamo`` uses
torch.export; torchvision's ``batched_nms`` is replaced by its coordinate trick without the empty-input
branch, which torch.export cannot trace. docs/validation.md ("Detection sets") quotes what this measured.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile

import numpy as np

BACKGROUND = 7.0
CLASSES = 91


def _images(torch, n: int, seed: int, size):
    """Smooth images in [0, 1]: 20x20 noise upsampled, a little pixel noise."""
    g = torch.Generator().manual_seed(seed)
    base = torch.rand(n, 3, 20, 20, generator=g)
    img = torch.nn.functional.interpolate(base, size=size, mode="bilinear", align_corners=False)
    return (img + 0.05 * torch.randn(n, 3, *size, generator=g)).clamp(0, 1)


def _trained_like(torch, model, size) -> None:
    """BatchNorm recalibrated on images; head outputs scaled to a trained head's spread; background favoured."""
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.reset_running_stats()
            module.momentum = None  # a cumulative average over the batches below
    model.train()
    with torch.no_grad():
        for i in range(8):
            feats = model.backbone(model.transform(list(_images(torch, 4, 100 + i, size)))[0].tensors)
            model.head(list(feats.values()))
    model.eval()
    with torch.no_grad():
        feats = list(model.backbone(model.transform(list(_images(torch, 4, 50, size)))[0].tensors).values())
        out = model.head(feats)
        for head, target, key in ((model.head.classification_head, 3.0, "cls_logits"),
                                  (model.head.regression_head, 1.0, "bbox_regression")):
            factor = target / out[key].std().item()
            for seq in head.module_list:
                seq[-1].weight.mul_(factor)
                seq[-1].bias.mul_(factor)
        for seq in model.head.classification_head.module_list:
            seq[-1].bias[0::CLASSES] += BACKGROUND  # channel a * classes + 0: anchor a's background logit


def export(out: str, size, dynamo: bool) -> None:
    """Build, make trained-like, export the model and write 8 images (see the module docstring)."""
    import torch
    import torchvision
    import torchvision.models.detection.ssd as ssd
    from torchvision.ops import boxes as box_ops

    def nms_by_offsets(boxes, scores, idxs, iou_threshold):
        offsets = idxs.to(boxes) * (boxes.max() + 1)
        return torch.ops.torchvision.nms(boxes + offsets[:, None], scores, iou_threshold)

    box_ops.batched_nms = nms_by_offsets
    ssd.box_ops.batched_nms = nms_by_offsets
    torch.manual_seed(0)
    model = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=CLASSES)
    _trained_like(torch, model, size)

    class Outputs(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            found = self.inner(list(x))[0]
            return found["boxes"], found["scores"], found["labels"]

    images = os.path.join(out, f"images_{size[0]}x{size[1]}")
    os.makedirs(images, exist_ok=True)
    name = os.path.join(out, f"ssdlite_{size[0]}x{size[1]}{'_dynamo' if dynamo else ''}.onnx")
    torch.onnx.export(Outputs(model).eval(), (_images(torch, 1, 0, size),), name, input_names=["images"],
                      output_names=["boxes", "scores", "labels"], opset_version=18 if dynamo else 17, dynamo=dynamo)
    for i in range(8):
        np.savez(os.path.join(images, f"image{i}.npz"), images=_images(torch, 1, i, size).numpy())
    print(name)


def measure(src: str, converted: str, folder: str) -> None:
    """Print, per image, the conversion's and the floor model's box movement (see the module docstring)."""
    from ampconv.core.lowtypes import low_type
    from ampconv.numerics import emulate, modelio, runners
    from ampconv.validation import detections as det
    from ampconv.validation import floor as floor_model
    from ampconv.validation.natures import output_natures

    tmp = tempfile.mkdtemp(prefix="ssdlite-")
    reference = modelio.load(src)
    modelio.ensure_types(reference)
    members = {n: v for n, v in output_natures(reference).items() if v.kind == "detections"}
    threshold = next(iter(members.values())).score_threshold
    rounded = modelio.load(src)
    modelio.ensure_types(rounded)
    floor_model.floor_model(rounded, low_type("fp16"))
    low = modelio.load(converted)
    modelio.ensure_types(low)
    emulate.emulate(low, infer_types=False)
    runs = {"reference": runners.make_session(src, "reference", runners.CPU, optimize=False),
            "floor": runners.make_session(modelio.save_derived(rounded, tmp, "floor", False), "floor", runners.CPU,
                                          optimize=False),
            "conversion": runners.make_session(modelio.save_derived(low, tmp, "conv", False), "conversion",
                                               runners.CPU, optimize=False)}
    totals = {name: [0, 0] for name in ("conversion", "floor")}  # matched boxes, of them beyond 0.1
    ratios = []
    for path in sorted(glob.glob(os.path.join(folder, "*.npz"))):
        feeds = dict(np.load(path))
        ref = det.images(members, runs["reference"].run(feeds))
        floor = det.images(members, runs["floor"].run(feeds))
        margin = det._margin(ref, floor, threshold, "fp16", 0.1)
        line, p99 = [os.path.basename(path)], {}
        for name in ("conversion", "floor"):
            found = det.match(ref, det.images(members, runs[name].run(feeds)), threshold, margin)
            beyond = [round(float(m), 2) for m in found.one_minus_iou if m > 0.1]
            totals[name][0] += found.one_minus_iou.size
            totals[name][1] += len(beyond)
            p99[name] = found.p99(found.one_minus_iou)
            line.append(f"{name}: {found.clear - found.missed}/{found.clear} matched, {found.extra} extra, "
                        f"p99 1 - IoU {p99[name]:.3f}, beyond 0.1: {beyond}")
        if p99["floor"] > 0:
            ratios.append(p99["conversion"] / p99["floor"])
        print(" | ".join(line))
    print("matched boxes (beyond 1 - IoU 0.1): " + ", ".join(f"{n} {t[0]} ({t[1]})" for n, t in totals.items())
          + f"; p99 1 - IoU, conversion over floor: {min(ratios):.2f}x to {max(ratios):.2f}x")


def main(argv=None) -> None:
    """Command-line entry (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    exporting = sub.add_parser("export")
    exporting.add_argument("--out", required=True)
    exporting.add_argument("--size", default="320x320")
    exporting.add_argument("--dynamo", action="store_true")
    measuring = sub.add_parser("measure")
    measuring.add_argument("model")
    measuring.add_argument("converted")
    measuring.add_argument("images")
    args = parser.parse_args(argv)
    if args.command == "export":
        export(args.out, tuple(int(v) for v in args.size.split("x")), args.dynamo)
    else:
        measure(args.model, args.converted, args.images)


if __name__ == "__main__":
    sys.exit(main())
