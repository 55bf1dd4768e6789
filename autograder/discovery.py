"""Find the submissions to grade: nbgrader's layout, a flat folder of notebooks, or an LMS zip.

    nbgrader (what `nbgrader collect` leaves): DIR/<student>/<assignment>/<notebook>.ipynb
    flat folder: DIR/<student>.ipynb (one assignment), or file names that contain the assignment id,
                 e.g. DIR/<student>_<assignment>.ipynb (as LMS exports name them)
    zip: either of the above inside a .zip; extracted safely (no absolute paths, no `..`, no links)

The student id comes from the path, never from the notebook.
"""

import os
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path


class DiscoveryError(Exception):
    """The submissions cannot be found or read: a message saying what to do."""


@dataclass(frozen=True)
class FoundSubmission:
    student_id: str
    assignment_id: str
    notebook: Path
    folder: Path | None = None  # the submission folder in nbgrader's layout (timestamp.txt, submission_secret.txt)


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
    source = Path(source)
    if not source.exists():
        raise DiscoveryError(f"{source}: no such file or directory; pass the folder that holds the submissions "
                             "(nbgrader's submitted/), a folder of .ipynb files, or a .zip")
    if source.is_file():
        if not zipfile.is_zipfile(source):
            raise DiscoveryError(f"{source}: not a folder and not a zip file")
        if unpack_to is None:
            raise DiscoveryError("a zip needs a folder to unpack into")
        source = extract_zip(source, unpack_to)
    if not os.access(source, os.R_OK | os.X_OK):
        raise DiscoveryError(f"{source}: cannot read this folder (permissions)")
    if (source / "submitted").is_dir() and not any(source.glob("*.ipynb")):
        source = source / "submitted"  # the course directory itself
    found = _nbgrader_layout(source, assignment_ids) or _flat_folder(source, assignment_ids)
    if students:
        found = [f for f in found if f.student_id in students]
    return sorted(found, key=lambda f: (f.student_id, f.assignment_id))


def _nbgrader_layout(root: Path, assignment_ids: list[str]) -> list[FoundSubmission]:
    found = []
    for student_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for assignment_id in assignment_ids:
            folder = student_dir / assignment_id
            if not folder.is_dir():
                continue
            preferred = folder / f"{assignment_id}.ipynb"
            notebooks = [preferred] if preferred.exists() or preferred.is_symlink() else sorted(folder.glob("*.ipynb"))
            if notebooks:
                found.append(FoundSubmission(student_dir.name, assignment_id, notebooks[0], folder))
    return found


def _flat_folder(root: Path, assignment_ids: list[str]) -> list[FoundSubmission]:
    found = []
    for path in sorted(root.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        stem = path.stem
        matches = [a for a in assignment_ids if a in stem]
        if matches:
            assignment_id = max(matches, key=len)
            student = re.sub(r"^[\s_\-.]+|[\s_\-.]+$", "", stem.replace(assignment_id, "", 1))
        elif len(assignment_ids) == 1:
            assignment_id, student = assignment_ids[0], stem
        else:
            continue
        if student:
            found.append(FoundSubmission(student, assignment_id, path, None))
    return found


def extract_zip(archive: Path, dest: Path) -> Path:
    """Unpack an LMS zip without letting a member escape `dest` or plant a link."""
    dest.mkdir(parents=True, exist_ok=True)
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
                out.write(src.read())
    return dest
