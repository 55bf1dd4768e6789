"""Find the submissions to grade: nbgrader's layout, a flat folder of notebooks, or an LMS download (Canvas, Moodle).

    nbgrader (what `nbgrader collect` leaves): DIR/<student>/<assignment>/<notebook>.ipynb
    flat folder: DIR/<student>.ipynb (one assignment), or file names that contain the assignment id,
                 e.g. DIR/<student>_<assignment>.ipynb; DIR/<student>/<assignment>.ipynb
    canvas, moodle: the LMS's "download submissions" (autograder.intake.lms): the student is the LMS's id in the LMS's
                 part of the name, mapped to nbgrader's roster through the LMS's roster export
    zip: any of the above inside a .zip; extracted safely (no absolute paths, no `..`, no links)

The student id comes from the path, never from the notebook, and in an LMS download never from the part of a
name the student chose. Every notebook under DIR is either found or skipped with a reason; two notebooks for one
(student, assignment) where the layout cannot tell which is meant are a conflict: neither is graded.
"""

import os
import re
import shutil
import stat
import zipfile
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from autograder.intake import lms
from autograder.intake.lms import CANVAS, LAYOUTS, MOODLE


class DiscoveryError(Exception):
    """The submissions cannot be found or read: a message saying what to do."""


@dataclass(frozen=True)
class FoundSubmission:
    student_id: str
    assignment_id: str
    notebook: Path
    folder: Path | None = None  # the submission folder in nbgrader's layout (timestamp.txt, submission_secret.txt)
    how: str = ""  # how the student id was found (for --dry-run and the run's output)
    unmapped: bool = False  # an LMS id that is not on nbgrader's roster: graded under the LMS id
    lms_late: bool = False  # the LMS marked the file late (Canvas's `_late`): late, when is not said


@dataclass(frozen=True)
class Skipped:
    notebook: Path
    reason: str


@dataclass(frozen=True)
class Conflict:
    student_id: str
    assignment_id: str
    notebooks: tuple[Path, ...]
    reason: str


@dataclass
class Discovery:
    layout: str
    root: Path
    found: list[FoundSubmission] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)

    def lines(self) -> list[str]:
        """What was not graded, and why: one line per notebook (notebooks of other assignments or other students
        than asked for, counted in one line each)."""
        def rel(path: Path) -> str:
            try:
                return str(path.relative_to(self.root))
            except ValueError:
                return str(path)

        out, counted = [], defaultdict(int)
        for s in self.skipped:
            if s.reason.startswith(("not asked for:", "not among --student")):
                counted[s.reason.split(":")[0]] += 1
            else:
                out.append(f"skipped {rel(s.notebook)}: {s.reason}")
        for c in self.conflicts:
            out.append(f"conflict: {c.student_id}/{c.assignment_id} not graded (its stored result is kept): {c.reason}: "
                       + ", ".join(rel(p) for p in c.notebooks))
        for reason, n in counted.items():
            out.append(f"skipped {n} notebook(s) {reason.replace('not asked for', 'of assignments not asked for')}")
        for f in self.found:
            if f.unmapped:
                out.append(f"unmapped: {rel(f.notebook)} graded as {f.student_id} ({f.how}); kept out of grades.csv")
        return out


MAX_ZIP_MEMBERS = 20000
MAX_ZIP_BYTES = 2 * 1024**3


def course_root(submissions: Path) -> Path | None:
    """The nbgrader course directory, when `submissions` is its submitted/ folder or the course itself."""
    path = Path(submissions).resolve()
    for course in ((path.parent,) if path.name == "submitted" else ()) + (path,):
        if (course / "submitted").is_dir() and ((course / "nbgrader_config.py").exists()
                                                or (course / "gradebook.db").exists()):
            return course
    return None


def find_submissions(source: Path, assignment_ids: list[str], students: set[str] | None = None,
                     unpack_to: Path | None = None) -> list[FoundSubmission]:
    """The submissions found (`discover(...).found`), for callers that need no reasons."""
    return discover(source, assignment_ids, students, unpack_to).found


def discover(source: Path, assignment_ids: list[str], students: set[str] | None = None,
             unpack_to: Path | None = None, layout: str = "auto", lms_export: "lms.LmsExport | None" = None,
             roster: dict[str, str] | None = None) -> Discovery:
    """Every notebook under `source`: found (student, assignment, file, how), skipped (why) or in conflict.

    `layout`: auto (recognised), nbgrader, flat, canvas or moodle; `lms_export` and `roster` (nbgrader id -> email)
    map an LMS download's ids to the roster."""
    if layout not in LAYOUTS:
        raise DiscoveryError(f"unknown layout {layout!r}: choose one of {', '.join(LAYOUTS)}")
    source = Path(source)
    if not source.exists():
        raise DiscoveryError(f"{source}: no such file or directory; pass the folder that holds the submissions "
                             "(nbgrader's submitted/), a folder of .ipynb files, or a .zip")
    if source.is_file():
        if not zipfile.is_zipfile(source):
            if _starts_like_a_zip(source):
                raise DiscoveryError(f"{source}: a zip file cut short or damaged (its table of contents is missing): "
                                     "the download is incomplete; download it again")
            raise DiscoveryError(f"{source}: not a folder and not a zip file")
        if unpack_to is None:
            raise DiscoveryError("a zip needs a folder to unpack into")
        source = extract_zip(source, Path(unpack_to) / re.sub(r"[^\w.-]", "_", source.stem))
    if not os.access(source, os.R_OK | os.X_OK):
        raise DiscoveryError(f"{source}: cannot read this folder (permissions)")
    if (source / "submitted").is_dir() and not any(source.glob("*.ipynb")):
        source = source / "submitted"  # the course directory itself
    notebooks = sorted(p for p in source.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.relative_to(source).parts)
    if layout == "auto":
        layout = _recognise(source, notebooks, assignment_ids)
    if layout in (CANVAS, MOODLE) and len(assignment_ids) != 1:
        raise DiscoveryError(f"a {layout} download holds one assignment: grade it with one assignment id, not "
                             f"{', '.join(assignment_ids)}")
    result = Discovery(layout, source)
    if layout == "nbgrader":
        candidates = _nbgrader_layout(source, assignment_ids, notebooks, result)
    elif layout == "flat":
        candidates = _flat_folder(source, assignment_ids, notebooks, result)
    else:
        candidates = _lms_download(source, layout, assignment_ids[0], notebooks, result, lms_export, roster or {})
    by_key = defaultdict(list)
    for f in candidates:
        by_key[(f.student_id, f.assignment_id)].append(f)
    for (student, assignment), group in by_key.items():
        if len(group) > 1:
            result.conflicts.append(Conflict(student, assignment, tuple(f.notebook for f in group),
                                             f"{len(group)} notebooks for one student and assignment "
                                             f"({'; '.join(f.how for f in group)})"))
            continue
        if students and student not in students:
            result.skipped.append(Skipped(group[0].notebook, "not among --student"))
            continue
        result.found.append(group[0])
    result.found.sort(key=lambda f: (f.student_id, f.assignment_id))
    return result


def _recognise(root: Path, notebooks: list[Path], assignment_ids: list[str]) -> str:
    if any((d / a).is_dir() for d in root.iterdir() if d.is_dir() for a in assignment_ids):
        return "nbgrader"
    # most notebooks named as the LMS names them: that LMS (the others are skipped with a line, not renamed)
    names = [p.relative_to(root).parts[0] for p in notebooks]
    if names and 2 * sum(bool(lms.parse_moodle_name(n)) for n in names) > len(names):
        return MOODLE
    if names and 2 * sum(bool(lms.parse_canvas_name(p.name)) for p in notebooks) > len(names):
        return CANVAS
    return "flat"


def _other_assignment(name: str) -> str | None:
    from autograder.assignments import assignment_ids

    return max((a for a in assignment_ids() if a in name), key=len, default=None)


def _nbgrader_layout(root: Path, assignment_ids: list[str], notebooks: list[Path], result: Discovery):
    found, used = [], set()
    for student_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for assignment_id in assignment_ids:
            folder = student_dir / assignment_id
            if not folder.is_dir():
                continue
            preferred = folder / f"{assignment_id}.ipynb"
            here = sorted(folder.glob("*.ipynb"))
            chosen = preferred if preferred.exists() or preferred.is_symlink() else (here[0] if here else None)
            if chosen is None:
                continue
            used.update(here)
            found.append(FoundSubmission(student_dir.name, assignment_id, chosen, folder, "folder name (nbgrader)"))
            for other in here:
                if other != chosen:
                    result.skipped.append(Skipped(other, f"another notebook of {student_dir.name}'s {assignment_id} "
                                                         f"submission ({chosen.name} is graded)"))
    for path in notebooks:
        if path in used:
            continue
        parts = path.relative_to(root).parts
        if len(parts) == 3 and _other_assignment(parts[1]) == parts[1]:
            result.skipped.append(Skipped(path, f"not asked for: {parts[1]}"))
        else:
            result.skipped.append(Skipped(path, "not where nbgrader's layout puts a submission "
                                                "(<student>/<assignment>/<notebook>.ipynb)"))
    return found


def _flat_folder(root: Path, assignment_ids: list[str], notebooks: list[Path], result: Discovery):
    found = []
    for path in notebooks:
        stem = path.stem
        matches = [a for a in assignment_ids if a in stem]
        if matches:
            assignment_id = max(matches, key=len)
            student = re.sub(r"^[\s_\-.]+|[\s_\-.]+$", "", stem.replace(assignment_id, "", 1))
            how = "file name"
            if not student and path.parent != root:
                student, how = path.parent.name, "folder name"
        elif len(assignment_ids) == 1 and not _other_assignment(stem):
            assignment_id, student, how = assignment_ids[0], stem, "file name"
        else:
            other = _other_assignment(stem)
            result.skipped.append(Skipped(path, f"not asked for: {other}" if other else
                                          f"its name holds none of the assignment ids {', '.join(assignment_ids)}"))
            continue
        if not student:
            result.skipped.append(Skipped(path, "no student id in its name or folder (name files "
                                                "<student>_<assignment>.ipynb)"))
            continue
        found.append(FoundSubmission(student, assignment_id, path, None, how))
    return found


def _lms_download(root: Path, kind: str, assignment_id: str, notebooks: list[Path], result: Discovery,
                  export: "lms.LmsExport | None", roster: dict[str, str]):
    """One student per LMS id; of a student's several notebooks, the one they named after the assignment (of several
    uploads of that name, the latest: Canvas's `x-1.ipynb`, Moodle's `x (1).ipynb`)."""
    files: dict[str, list[tuple[int, str, Path, str]]] = defaultdict(list)  # lms id -> (order, own name, path, note)
    for path in notebooks:
        parts = path.relative_to(root).parts
        if kind == CANVAS:
            name = lms.parse_canvas_name(path.name)
            if name is None:
                result.skipped.append(Skipped(path, "not named as Canvas names a download "
                                                    "(<name>_<user id>_<file id>_<file>)"))
                continue
            files[name.user_id].append((name.attachment_id, lms.students_own_name(name.file), path,
                                        " (Canvas: late)" if name.late else ""))
        else:
            name = lms.parse_moodle_name(parts[0])
            if name is None or name.feedback or name.plugin != "file":
                why = "a Moodle feedback file" if name and name.feedback else \
                    f"a Moodle {name.plugin} submission, not a file" if name else \
                    "not in a Moodle submission folder (<Full Name>_<participant id>_assignsubmission_file_)"
                result.skipped.append(Skipped(path, why))
                continue
            own, upload = lms.moodle_upload(path.name if len(parts) > 1 else name.file)
            files[name.participant_id].append((upload, own, path, ""))
    found, mapped_ids = [], {}
    wanted = f"{assignment_id}.ipynb".lower()
    for lms_id, entries in sorted(files.items()):
        mapped = lms.map_student(kind, lms_id, export, roster)
        named = [e for e in entries if e[1].lower() == wanted]
        if len(entries) == 1:
            chosen = entries[0]
        elif named and len({e[0] for e in named}) == len(named):
            chosen = max(named, key=lambda e: e[0])  # the latest upload of that name (Canvas's file id, Moodle's (n))
        else:
            result.conflicts.append(Conflict(mapped.student_id, assignment_id, tuple(e[2] for e in entries),
                                             f"{len(entries)} notebooks from {mapped.how}, "
                                             f"{'several' if named else 'none'} named {assignment_id}.ipynb"))
            continue
        for e in entries:
            if e is not chosen:
                result.skipped.append(Skipped(e[2], f"another file of {mapped.how} ({chosen[2].name} is graded)"))
        found.append(FoundSubmission(mapped.student_id, assignment_id, chosen[2], None, mapped.how + chosen[3],
                                     mapped.unmapped, lms_late=bool(chosen[3])))
        mapped_ids.setdefault(mapped.student_id, []).append(lms_id)
    return found


def _starts_like_a_zip(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PK\x03\x04"  # a zip's first member header: the start of a download cut short
    except OSError:
        return False


def extract_zip(archive: Path, dest: Path) -> Path:
    """Unpack an LMS zip without letting a member escape `dest` or plant a link; `dest` is emptied first (no
    notebook of an earlier download stays behind). A member that cannot be unpacked (a damaged download: its data
    fails its check, or is cut short) refuses the whole zip, and nothing of it stays unpacked: graded, the rest
    would score the damaged member's student as missing."""
    if dest.is_dir() and not dest.is_symlink():
        shutil.rmtree(dest)
    dest.mkdir(parents=True, exist_ok=True)
    try:
        _unpack(archive, dest)
    except DiscoveryError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise DiscoveryError(f"{archive}: cannot be unpacked ({exc}); a download that fails so is incomplete or "
                             "damaged: download it again (nothing of it was graded)") from None
    return dest


def _unpack(archive: Path, dest: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        members = zf.infolist()
        if len(members) > MAX_ZIP_MEMBERS or sum(m.file_size for m in members) > MAX_ZIP_BYTES:
            raise DiscoveryError(f"{archive}: too many or too large members for a class's submissions")
        root = dest.resolve()
        for member in members:
            name = member.filename
            mode = member.external_attr >> 16
            target = (dest / name).resolve()
            if name.startswith(("/", "\\")) or ".." in Path(name).parts or not str(target).startswith(str(root)):
                raise DiscoveryError(f"{archive}: member {name!r} points outside the archive; refusing to unpack it")
            if stat.S_ISLNK(mode):
                raise DiscoveryError(f"{archive}: member {name!r} is a symbolic link; refusing to unpack it")
            if member.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(member) as src, open(target, "wb") as out:
                try:
                    out.write(src.read())
                except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
                    raise zipfile.BadZipFile(f"member {name!r}: {exc}") from None
