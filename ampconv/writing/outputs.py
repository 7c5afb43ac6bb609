"""Output-path guards shared by every path ampconv writes, and what a run wrote.

Every file a command writes (the converted model, its ``<out>.data`` file, a
JSON report, any future output) follows the same rules, checked before any
work starts:

- never an input of the run (the model, its external data files, validation
  samples): compared by resolved path and by inode, so symlinks and hard
  links are caught;
- never another output of the same run (``--report`` on the ``-o`` path or on
  the model's data file);
- an existing file only with ``--overwrite``; a report that validation merges
  into is the exception: an existing ampconv report (``is_report``) is merged
  into, anything else needs ``--overwrite``;
- the folder exists, is a folder and is writable.

The converted model's default path (``default_output_path``) and its
pre-write check (``check_output_path``) live here too.

Writes are atomic (a temporary file beside the target, then ``os.replace``):
a reader never sees half a file, and a failure leaves the old file intact. A
replaced file keeps its permission bits; a new file gets what ``open()``
gives under the umask.

A run that fails after it published something says so: ``publish`` and
``write_json_atomic`` note each file in the current ``RunRecord`` (see
``recording``), which the CLI's error handler reads to name what was written.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import os
import secrets
import shutil
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, List, Optional, Sequence, Tuple

from ampconv.errors import OutputError, named

if TYPE_CHECKING:  # only for annotations: onnx-ir is not imported at start-up
    import onnx_ir as ir

# Top-level key (and format version) that marks a JSON file as a report
# ``ampconv convert --report`` wrote; ``is_report`` also accepts older reports.
REPORT_MARKER = "ampconv_report"
REPORT_FORMAT = 1
# Keys every conversion report has (reports written before the marker existed).
_CONVERT_REPORT_KEYS = frozenset({"source", "output", "dtype", "level", "nodes"})

# (what it is, its path), e.g. ("the input model", Path("m.onnx")).
Named = Tuple[str, Path]

# Total weight bytes above which ``ampconv.writing.writer`` writes a model asked for inline with external
# data anyway (protobuf cannot serialize 2 GB; the margin is for the graph): the output guard must
# expect that data file.
INLINE_WEIGHT_LIMIT = int(1.8 * 1024**3)


def default_output_path(src: Path, dtype: str) -> Path:
    """``<stem>.<dtype>.onnx`` beside the input."""
    return src.with_name(f"{src.stem}.{dtype}.onnx")


def data_file_name(dst: Path) -> str:
    """Name of the external data file written beside ``dst``."""
    return Path(dst).name + ".data"


def same_file(a: os.PathLike | str, b: os.PathLike | str) -> bool:
    """True when ``a`` and ``b`` name the same file (resolved path or inode)."""
    if Path(a).resolve() == Path(b).resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet
        return False


# --- checks -----------------------------------------------------------------


def check_output_path(src: Path, dst: Path, model: ir.Model, overwrite: bool) -> None:
    """Refuse outputs that would destroy user data or cannot be written.

    Compares resolved paths and, for files that exist, inode identity, so a
    symlink or hard link to the input or its external data is caught too. An
    existing ``<dst>.data`` needs ``overwrite`` when the model will be written
    with external data (as ``write_model`` decides). The rules are
    ``check_model_output``'s (shared by every write path).
    """
    # Imported here: this module stays free of onnx/onnx-ir at import (the CLI loads it at start-up).
    from ampconv.reading.load import external_data_files, weight_bytes

    data_files = external_data_files(model)
    writes_data = bool(data_files) or (_file_may_hold(src, INLINE_WEIGHT_LIMIT) and weight_bytes(model) > INLINE_WEIGHT_LIMIT)
    check_model_output(src, dst, data_files, overwrite, writes_data=writes_data)


def _file_may_hold(src: Path, weight_limit: int) -> bool:
    """Whether the model file ``src`` may hold more than ``weight_limit`` inline weight bytes.

    Inline weights are stored in the file, at least one byte for every eight
    that ``load.weight_bytes`` counts (an int64 list attribute is
    varint-packed), so a small file answers no without walking the model.
    """
    try:
        return 8 * Path(src).stat().st_size > weight_limit
    except OSError:
        return True


def check_model_output(
    src: Path, dst: Path, input_data: Iterable[Path], overwrite: bool, writes_data: bool = True
) -> None:
    """Refuse a model output ``dst`` that would destroy user data or cannot be written.

    ``input_data`` are the input model's external data files. ``dst`` and the
    data file ``<dst>.data`` it may write are compared with the input and its
    data files by resolved path and, for files that exist, inode identity.
    With ``writes_data`` (the model will be saved with external data), an
    existing ``<dst>.data`` needs ``overwrite`` like ``dst`` itself.
    """
    src, dst = Path(src), Path(dst)
    data = dst.parent / data_file_name(dst)
    if same_file(dst, src):
        raise OutputError(f"{dst}: output path is the input model; choose another with -o")
    if same_file(data, src):
        raise OutputError(f"{dst}: its data file {data.name} would overwrite the input model {src}")
    for existing in input_data:
        if same_file(dst, existing) or same_file(data, existing):
            raise OutputError(
                f"{dst}: writing here would overwrite the input's external data file {existing}"
            )
    _check_folder(dst, f"{dst}: output folder")
    if dst.is_dir():
        raise OutputError(f"{dst}: is a directory")
    if data.is_dir():
        raise OutputError(f"{dst}: its data file name {data} is taken by a directory")
    if dst.exists() and not overwrite:
        raise OutputError(f"{dst}: already exists; pass {named('overwrite', True)} to replace it")
    if writes_data and data.exists() and not overwrite:
        raise OutputError(f"{dst}: its data file {data} already exists; pass {named('overwrite', True)} to replace it")


def check_report_path(
    path: os.PathLike | str,
    *,
    inputs: Sequence[Named] = (),
    outputs: Sequence[Named] = (),
    overwrite: bool = False,
    merge: bool = False,
) -> None:
    """Refuse a report path that would destroy user data or cannot be written.

    ``inputs`` and ``outputs`` are the run's other files as (what, path). The
    report may be none of them. An existing file needs ``overwrite``, except
    with ``merge`` (validation adds its key to an existing report) when the file
    is an ampconv report (``is_report``). Raises ``OutputError``, whose message
    starts with the path and says "cannot write the report" for folder problems.
    """
    path = Path(path)
    _refuse_unwritable(path, "the report", inputs, outputs)
    if not path.exists() or overwrite:
        return
    if not merge:
        raise OutputError(f"{path}: the report file already exists; pass {named('overwrite', True)} to replace it")
    if not is_report(path):
        raise OutputError(
            f"{path}: exists and is not an ampconv JSON report, so the validation result "
            f"cannot be merged into it; pass {named('overwrite', True)} to replace it"
        )


def _refuse_unwritable(path: Path, what: str, inputs: Sequence[Named], outputs: Sequence[Named] = ()) -> None:
    """The checks every one-file output shares: none of ``inputs`` or ``outputs``, a writable folder, not a folder."""
    for input_what, other in inputs:
        if same_file(path, other):
            raise OutputError(f"{path}: {what} would overwrite {input_what} {other}; choose another path")
    for output_what, other in outputs:
        if same_file(path, other):
            raise OutputError(f"{path}: {what} path is also the path of {output_what} {other}; choose another path")
    _check_folder(path, f"{path}: cannot write {what}: folder")
    if path.is_dir():
        raise OutputError(f"{path}: cannot write {what}: is a directory")


def _check_folder(path: Path, prefix: str) -> None:
    """The folder of ``path`` exists, is a folder, and we may create files in it."""
    folder = path.parent
    if not folder.exists():
        raise OutputError(f"{prefix} {folder} does not exist")
    if not folder.is_dir():
        raise OutputError(f"{prefix} {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{prefix} {folder} is not writable")


def is_report(path: os.PathLike | str) -> bool:
    """Whether ``path`` holds an ampconv report (a JSON object validation may merge into).

    A report is a JSON object with the ``REPORT_MARKER`` key (what
    ``convert --report`` writes), with every key of a conversion report (older
    reports), or with a ``validation`` key (what ``validate --report`` writes
    into a new file). Anything else, JSON or not, is not.
    """
    data = read_report(path)
    return data is not None


def read_report(path: os.PathLike | str) -> Optional[dict]:
    """The JSON object in ``path`` when it is an ampconv report (see ``is_report``), else None."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if REPORT_MARKER in data or "validation" in data or _CONVERT_REPORT_KEYS <= data.keys():
        return data
    return None


def model_input_files(model_path: os.PathLike | str, what: str = "the input model") -> List[Named]:
    """The model file and the external data files it names, as (what, path).

    Read from the protobuf without its external data (cheap when weights are
    external). A model that cannot be read gives just its own path: loading it
    fails later with the proper message.
    """
    model_path = Path(model_path)
    files: List[Named] = [(what, model_path)]
    try:
        import onnx

        proto = onnx.load(str(model_path), load_external_data=False)
    except Exception:
        return files
    seen = set()
    for tensor in _all_tensors(proto.graph):
        if tensor.data_location != 1:  # onnx.TensorProto.EXTERNAL
            continue
        for entry in tensor.external_data:
            if entry.key == "location" and entry.value not in seen:
                seen.add(entry.value)
                files.append((f"the external data file of {what}", model_path.parent / entry.value))
    return files


def _all_tensors(graph) -> Iterator:  # noqa: ANN001 - onnx.GraphProto
    """Every TensorProto of a graph, its subgraphs included (initializers and attributes)."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _all_tensors(attr.g)
            for sub in attr.graphs:
                yield from _all_tensors(sub)


def sample_input_files(paths: Iterable[os.PathLike | str]) -> List[Named]:
    """Validation sample files as (what, path): each file given, and the files under each folder."""
    files: List[Named] = []
    for given in paths:
        given = Path(given)
        if given.is_dir():
            files.extend(("the input sample", p) for p in sorted(given.rglob("*")) if p.is_file())
        else:
            files.append(("the input sample", given))
    return files


# --- writing -------------------------------------------------------------------


@contextlib.contextmanager
def staging_dir(dst: Path) -> Iterator[Path]:
    """A private folder beside ``dst`` (same filesystem, so renames are atomic).

    Removed on exit whatever happens, KeyboardInterrupt included.
    """
    dst = Path(dst)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", suffix=".ampconv-tmp", dir=dst.parent))
    except OSError as exc:
        raise OutputError(f"{dst}: cannot write in {dst.parent} ({exc.strerror or exc})") from None
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def publish(staged: Path, dst: Path, what: str = "the converted model") -> None:
    """Move every file of the staging folder beside ``dst``; the model file last.

    The model is renamed last so a reader never finds a new model whose data
    file is still the old one. A file that replaces an existing one takes its
    permission bits. Each file moved is noted in the current ``RunRecord``.
    """
    staged, dst = Path(staged), Path(dst)
    model_file = staged / dst.name
    for item in sorted(staged.iterdir()):
        if item != model_file:
            target = dst.parent / item.name
            _keep_mode(item, target)
            os.replace(item, target)
            record_written("its data file", target, part_of=dst)
    _keep_mode(model_file, dst)
    os.replace(model_file, dst)
    record_written(what, dst)


def match_mode(path: os.PathLike | str, like: os.PathLike | str) -> None:
    """Give ``path`` the permission bits of ``like`` (nothing when either is missing).

    For a file written through code that cannot take ``mode_like`` (the
    validation report's merge): a new report then ends with its model's mode.
    """
    with contextlib.suppress(OSError):
        _keep_mode(Path(path), Path(like))


def _keep_mode(new: Path, old: Path) -> None:
    """Give ``new`` the permission bits of ``old`` when ``old`` exists."""
    try:
        mode = stat.S_IMODE(os.stat(old).st_mode)
    except OSError:
        return
    os.chmod(new, mode)


def write_json_atomic(
    path: os.PathLike | str, data, what: str = "the report", mode_like: os.PathLike | str | None = None
) -> None:
    """Write ``data`` as indented JSON to ``path`` through a temporary file beside it.

    The temporary file is created like ``open()`` would (mode 0666 less the
    umask), takes the replaced file's mode when there is one, else the mode
    of ``mode_like`` when given (a report takes its model's mode), and is renamed
    over ``path`` only once complete; on any failure, Ctrl-C included, it is
    removed. OS errors become ``OutputError`` ("cannot write the report").
    The file is noted in the current ``RunRecord`` as ``what``.
    """
    def dump(fh) -> None:
        json.dump(data, fh, indent=2)
        fh.write("\n")

    _write_atomic(Path(path), dump, "the report", what, mode_like)


def check_single_output(
    path: os.PathLike | str, what: str, *, inputs: Sequence[Named] = (), overwrite: bool = False
) -> None:
    """Refuse a one-file output (``what``, e.g. "the HTML page") that would destroy user data.

    Never one of ``inputs`` (resolved path or inode), the folder must exist and
    be writable, and an existing file needs ``overwrite``. Raises
    ``OutputError`` whose message starts with the path.
    """
    path = Path(path)
    _refuse_unwritable(path, what, inputs)
    if path.exists() and not overwrite:
        raise OutputError(f"{path}: already exists; pass {named('overwrite', True)} to replace it")


def write_text_atomic(path: os.PathLike | str, text: str, what: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` like ``write_json_atomic``: temporary file beside it, then rename.

    On any failure the temporary file is removed and an existing ``path`` is
    left as it was; OS errors become ``OutputError``. Noted in the current
    ``RunRecord`` as ``what``.
    """
    _write_atomic(Path(path), lambda fh: fh.write(text), what, what)


def _write_atomic(path: Path, write, label: str, what: str, mode_like: Optional[os.PathLike | str] = None) -> None:
    """The atomic write behind ``write_json_atomic`` and ``write_text_atomic``.

    ``write(fh)`` fills a temporary file beside ``path`` (UTF-8 text), which
    takes the replaced file's mode, else ``mode_like``'s, and is renamed over
    ``path`` once complete; on any failure, Ctrl-C included, it is removed. OS
    errors become ``OutputError`` ("cannot write ``label``"); the file is noted
    in the current ``RunRecord`` as ``what``.
    """
    try:
        fd, tmp = _create_beside(path)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write {label}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            write(fh)
        if mode_like is not None and not path.exists():
            _keep_mode(tmp, Path(mode_like))
        _keep_mode(tmp, path)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputError(f"{path}: cannot write {label}: {exc.strerror or exc}") from None
        raise
    record_written(what, path)


def _create_beside(path: Path) -> Tuple[int, Path]:
    """A new, empty, exclusively created temporary file in ``path``'s folder: (fd, its path)."""
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.ampconv-tmp"
        try:
            # 0o666: the kernel applies the umask, exactly as open(path, "w") would.
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


# --- what a run wrote ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Written:
    """One published file: what it is, where, and the file it belongs to (a model's data file)."""

    what: str
    path: Path
    part_of: Optional[Path] = None


@dataclasses.dataclass
class RunRecord:
    """What one command run has published so far, and what it is doing now.

    ``written`` lists the files in the order they were published; ``phase``
    (e.g. "validation") names the step in progress, for an interrupt message.
    """

    written: List[Written] = dataclasses.field(default_factory=list)
    phase: Optional[str] = None

    def describe(self) -> str:
        """One clause naming every file written, e.g. "the converted model was written to o.onnx".

        A data file is named with the model it belongs to once that model is
        published too, on its own otherwise. Empty when nothing was written.
        """
        owners = {w.path for w in self.written if w.part_of is None}
        parts = []
        for w in self.written:
            if w.part_of is not None and w.part_of in owners:
                continue
            text = f"{w.what} was written to {w.path}"
            companions = [str(c.path) for c in self.written if c.part_of is not None and c.part_of == w.path]
            if companions:
                text += f" (with its data file {', '.join(companions)})"
            parts.append(text)
        return "; ".join(parts)


_RECORD: contextvars.ContextVar[Optional[RunRecord]] = contextvars.ContextVar("ampconv_run_record", default=None)


@contextlib.contextmanager
def recording() -> Iterator[RunRecord]:
    """Collect what ``publish`` and ``write_json_atomic`` write until the block ends."""
    record = RunRecord()
    token = _RECORD.set(record)
    try:
        yield record
    finally:
        _RECORD.reset(token)


def record_written(what: str, path: os.PathLike | str, part_of: Optional[os.PathLike | str] = None) -> None:
    """Note a published file in the current ``RunRecord`` (nothing happens outside ``recording``).

    ``part_of`` names the file this one belongs to (a model, for its data file).
    """
    record = _RECORD.get()
    if record is not None:
        record.written.append(Written(what, Path(path), Path(part_of) if part_of is not None else None))


def set_phase(phase: Optional[str]) -> None:
    """Name the step now running (e.g. "validation") in the current ``RunRecord``, if any."""
    record = _RECORD.get()
    if record is not None:
        record.phase = phase
