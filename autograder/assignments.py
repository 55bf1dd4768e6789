"""What an assignment is, read from its nbgrader source notebook: the record, the parts, their points, their cells.

The assignments are found by scanning: every `assignments/<id>/<id>.ipynb` whose notebook metadata holds an
`autograde` record is one. The record is declared by the instructor, next to the assignment, and travels into
`release/` with the notebook (a student-side tool can read it)::

    "metadata": {"autograde": {"order": 1, "hand_parts": ["rmsnorm_hand"]}, ...}

- `order`: where the assignment stands in the chapter (the CLI, the summary and the demo list them in this order);
- `hand_parts`: the grade ids of the parts computed by hand with per-student numbers (solutions/hand/<id>.py
  then defines `hand_inputs(student_id)` and `hand_answers(inputs)`, without torch); every check of such a part is a hand check.

The parts, their points and their titles are the notebook's own grade cells and headings. Adding an assignment is
adding files: the source notebook with its record, `solutions/<id>.py`, `autograder/checks/<id>.py` and, for the
self-test and the demo, `autograder/examples/<id>.py`.

The source notebook in assignments/ is the only authority on a part's maximum and on the record: nothing in a
submission (edited metadata, duplicated cells) can change them.
"""

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from autograder import REPO_ROOT

RECORD_KEY = "autograde"


class UnknownAssignment(ValueError):
    pass


class AssignmentRecordError(ValueError):
    """A source notebook's `autograde` record is malformed: the instructor's error, stated with the file."""


@dataclass(frozen=True)
class Part:
    grade_id: str  # the grade cell that is the part
    points: float
    answer_cells: tuple[str, ...]  # grade ids of the solution cells before it
    written: bool  # a markdown answer, read by the instructor, not auto-graded


@dataclass(frozen=True)
class Assignment:
    id: str
    source: Path
    parts: tuple[Part, ...]
    grade_cells: frozenset[str]  # grade ids of all grade cells (self-checks): never run when grading
    order: int = 0  # the record's place in the chapter
    hand_parts: frozenset[str] = frozenset()  # the record's parts computed by hand with per-student numbers
    # sources of the code cells tagged "autograde": {"not_for_grading": true} (demo and plot cells; see
    # autograder.intake.skipping): a submitted cell left byte-identical to one of them need not run
    not_for_grading: frozenset[str] = frozenset()
    # sources of every code cell of the source notebook (the instructor's text): a submitted cell left byte-identical
    # to one has its name analysis (autograder.intake.skipping) computed once per process, not once per submission
    instructor_code: frozenset[str] = frozenset()

    @property
    def has_hand(self) -> bool:
        return bool(self.hand_parts)

    def is_hand_part(self, grade_id: str) -> bool:
        return grade_id in self.hand_parts

    @property
    def max_score(self) -> float:
        return sum(p.points for p in self.parts)

    @property
    def notebook_name(self) -> str:
        return self.source.name

    @property
    def release(self) -> Path:
        """The notebook as students get it (`nbgrader generate_assignment`'s release/<id>/), beside assignments/."""
        return self.source.parent.parent.parent / "release" / self.id / self.source.name

    @property
    def cells_notebook(self) -> Path:
        """The notebook whose cells the gradebook records (nbgrader's SaveCells): the release, else the source."""
        return self.release if self.release.is_file() else self.source

    def part(self, grade_id: str) -> Part:
        return next(p for p in self.parts if p.grade_id == grade_id)


def _source(root: Path, assignment_id: str) -> Path:
    return root / "assignments" / assignment_id / f"{assignment_id}.ipynb"


def _record(source: Path, metadata) -> tuple[int, list[str]] | None:
    """(order, hand_parts) of a notebook's record, None when it has none; AssignmentRecordError when malformed."""
    record = metadata.get(RECORD_KEY)
    if record is None:
        return None
    where = f"{source}: notebook metadata {RECORD_KEY!r}"
    if not isinstance(record, dict):
        raise AssignmentRecordError(f"{where} must be an object, e.g. {{\"order\": 1, \"hand_parts\": []}}")
    unknown = sorted(set(record) - {"order", "hand_parts"})
    if unknown:
        raise AssignmentRecordError(f"{where} has unknown keys {unknown}; the keys are 'order' and 'hand_parts'")
    order, hand = record.get("order"), record.get("hand_parts", [])
    if isinstance(order, bool) or not isinstance(order, int):
        raise AssignmentRecordError(f"{where}: 'order' must be an integer, not {order!r}")
    if not isinstance(hand, list) or not all(isinstance(h, str) for h in hand):
        raise AssignmentRecordError(f"{where}: 'hand_parts' must be a list of grade ids, not {hand!r}")
    return order, hand


@functools.lru_cache(maxsize=None)
def assignment_ids(root: Path = REPO_ROOT) -> tuple[str, ...]:
    """The course's assignments, found by scanning assignments/ for source notebooks with a record, in the
    records' order (then by id)."""
    found = []
    for folder in sorted((root / "assignments").iterdir()) if (root / "assignments").is_dir() else ():
        source = _source(root, folder.name)
        if not source.is_file():
            continue
        try:  # the metadata only: the scan runs for every `autograde --help`
            metadata = json.loads(source.read_text(encoding="utf-8")).get("metadata", {})
        except Exception as error:  # the instructor's notebook does not parse
            raise AssignmentRecordError(f"{source}: not a readable notebook ({error})") from None
        record = _record(source, metadata)
        if record is not None:
            found.append((record[0], folder.name))
    return tuple(a for _, a in sorted(found))


@functools.lru_cache(maxsize=None)
def load_assignment(assignment_id: str, root: Path = REPO_ROOT) -> Assignment:
    known = assignment_ids(root)
    if assignment_id not in known:
        raise UnknownAssignment(f"unknown assignment {assignment_id!r}; the assignments are: {', '.join(known)}")
    source = _source(root, assignment_id)
    metadata, cells = source_cells(source)
    order, hand = _record(source, metadata)
    parts, pending, grade_cells, demo_cells = [], [], set(), set()
    for number, cell in enumerate(cells, 1):
        meta = cell.metadata.get("nbgrader", {})
        if (cell.metadata.get(RECORD_KEY) or {}).get("not_for_grading"):
            if cell.cell_type != "code" or meta.get("solution") or meta.get("grade"):
                raise AssignmentRecordError(f"{source}: cell {number} is tagged not_for_grading but is not a plain "
                                            "code cell (a solution or grade cell always counts)")
            demo_cells.add(cell.source)
        if meta.get("grade"):
            grade_cells.add(meta["grade_id"])
            written = cell.cell_type == "markdown"
            answers = (meta["grade_id"],) if written else tuple(pending)
            parts.append(Part(meta["grade_id"], float(meta.get("points", 0)), answers, written))
            pending = []
        elif meta.get("solution"):
            pending.append(meta["grade_id"])
    part_ids = {p.grade_id for p in parts}
    if not set(hand) <= part_ids:
        raise AssignmentRecordError(f"{source}: 'hand_parts' names {sorted(set(hand) - part_ids)}, which are not "
                                    f"graded parts of the notebook (the parts: {', '.join(p.grade_id for p in parts)})")
    return Assignment(assignment_id, source, tuple(parts), frozenset(grade_cells), order, frozenset(hand),
                      frozenset(demo_cells), frozenset(c.source for c in cells if c.cell_type == "code"))


def source_cells(source: Path) -> tuple[dict, list]:
    """The instructor's notebook's metadata and cells, as nbformat.read(source, as_version=4) gives them: each cell
    with its metadata, cell_type and source (one string), every dict a NotebookNode (by key and by attribute, a
    missing one an AttributeError). Read as JSON, without importing nbformat (about 0.1 s of a run's start, before
    its workers can start), when it is nbformat 4 of the plain shape nbformat reads without raising (`_plain_v4`);
    the keys nbformat drops on reading are dropped too (TRANSIENT_METADATA). Any other notebook (another version
    or shape, not JSON, not UTF-8) is nbformat's to read, convert or refuse with its own error: its own cells then.
    What the JSON read leaves out is nbformat's check against its JSON schema, which logs what fails and warns of
    cells without ids or with the same id (and renumbers those, ids not given here); nbformat.read still reads
    these notebooks after a run's results (the release's cells into the gradebook, the source's titles for the
    pages) and says it there. tests/test_assignment_record.py compares the two."""
    try:
        nb = json.loads(source.read_text(encoding="utf-8"))
    except ValueError:  # not JSON, or not UTF-8: nbformat's own error, as before
        nb = None
    if not _plain_v4(nb):
        import nbformat

        nb = nbformat.read(source, as_version=4)
        return nb.metadata, list(nb.cells)
    cells = []
    for cell in nb["cells"]:
        text = cell["source"]
        metadata = {k: v for k, v in cell["metadata"].items() if k not in TRANSIENT_METADATA["cell"]}
        cells.append(NotebookNode(metadata=_nodes(metadata), cell_type=cell["cell_type"],
                                  source="".join(text) if isinstance(text, list) else text))
    return _nodes({k: v for k, v in nb["metadata"].items() if k not in TRANSIENT_METADATA["notebook"]}), cells


class NotebookNode(dict):
    """What nbformat's NotebookNode is to a reader, without importing nbformat: a dict whose keys are also its
    attributes (a missing one: AttributeError), of the same name, so that whatever fails on an instructor's odd
    value says what it says with nbformat ("unhashable type: 'NotebookNode'")."""

    __slots__ = ()

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


def _nodes(value):
    """`value` with every dict in it a NotebookNode, as nbformat.from_dict makes them (lists stay lists)."""
    if isinstance(value, dict):
        return NotebookNode({k: _nodes(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_nodes(v) for v in value]
    return value


# what nbformat.v4's reader strips (nbformat.v4.rwbase.strip_transient)
TRANSIENT_METADATA = {"notebook": ("orig_nbformat", "orig_nbformat_minor", "signature"), "cell": ("trusted",)}
_NOTEBOOK_KEYS = {"nbformat", "nbformat_minor", "metadata", "cells"}
_CELL_KEYS = {"id", "cell_type", "metadata", "source", "outputs", "execution_count", "attachments"}
_METADATA_DEPTH = 64  # nbformat makes nested metadata NotebookNodes recursively: deeper ones are its to take or not


def _plain_v4(nb) -> bool:
    """A notebook nbformat 4 reads without raising and whose metadata and cells it gives as they are here: integer
    versions (nbformat asserts them), only the schema's keys, no outputs and no attachments (nbformat rejoins their
    lines, and raises on their odd shapes), dict metadata no deeper than _METADATA_DEPTH, each cell a type and a
    source (text or lines of text)."""
    if not (v4_minor(nb) is not None and set(nb) <= _NOTEBOOK_KEYS and isinstance(nb.get("metadata"), dict)
            and isinstance(nb.get("cells"), list) and _depth_within(nb["metadata"], _METADATA_DEPTH)):
        return False
    for c in nb["cells"]:
        if not (isinstance(c, dict) and set(c) <= _CELL_KEYS and isinstance(c.get("cell_type"), str)
                and isinstance(c.get("metadata"), dict) and c.get("outputs", []) == [] and "attachments" not in c
                and (c.get("execution_count") is None or type(c["execution_count"]) is int)
                and (isinstance(c.get("source"), str) or isinstance(c.get("source"), list)
                     and all(isinstance(line, str) for line in c["source"]))
                and (c.get("id") is None or isinstance(c["id"], str))
                and _depth_within(c["metadata"], _METADATA_DEPTH)):
            return False
    return True


def v4_minor(nb) -> int | None:
    """The minor version of a notebook (parsed JSON) of version 4 as nbformat reads the two off it
    (nbformat.reader.get_version: minor 0 when absent); None when either is not an integer, which nbformat's
    validation asserts, or the version is not 4."""
    if not isinstance(nb, dict):
        return None
    version, minor = nb.get("nbformat", 1), nb.get("nbformat_minor", 0)
    return minor if type(version) is int and version == 4 and type(minor) is int else None


def _depth_within(value, limit: int) -> bool:
    """Whether dicts and lists nest at most `limit` deep in `value`."""
    level, depth = [value], 0
    while level:
        depth += 1
        if depth > limit:
            return False
        level = [v for x in level for v in (x.values() if isinstance(x, dict) else x)
                 if isinstance(v, (dict, list))]
    return True


def all_assignments(root: Path = REPO_ROOT) -> list[Assignment]:
    return [load_assignment(a, root) for a in assignment_ids(root)]


def is_hand_check(assignment_id: str, grade_id: str) -> bool:
    """A check of a part the record declares a hand computation (False for an unknown assignment)."""
    try:
        return load_assignment(assignment_id).is_hand_part(grade_id)
    except UnknownAssignment:
        return False


def has_hand(assignment_id: str) -> bool:
    try:
        return load_assignment(assignment_id).has_hand
    except UnknownAssignment:
        return False


def assignment_of_notebook(grade_ids: set[str], expected: str) -> str | None:
    """The other assignment a notebook belongs to, judged by its grade cells: None when it has any grade cell of
    `expected` (or none of any assignment), else the assignment whose grade cells it holds most of."""
    cells = {a.id: a.grade_cells | {c for p in a.parts for c in p.answer_cells} for a in _all_cached()}
    if not grade_ids or grade_ids & cells.get(expected, set()):
        return None
    best = max(cells, key=lambda a: len(grade_ids & cells[a]))
    return best if grade_ids & cells[best] else None


@functools.lru_cache(maxsize=1)
def _all_cached() -> tuple[Assignment, ...]:
    return tuple(all_assignments())


if __name__ == "__main__":  # the assignment ids, one per line (scripts/dev.sh reads them)
    print("\n".join(assignment_ids()))
