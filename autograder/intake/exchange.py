"""What nbgrader's exchange can tell about a collected submission that the student could not forge.

nbgrader's exchange trusts the submitter: anyone can `nbgrader submit --student=bob`, and `nbgrader
collect` takes the student id from the folder name and the time from the student-written timestamp.txt.
What the operating system records is harder to fake, but only in the exchange's inbound folder
(`<root>/<course_id>/inbound/<student>+<assignment>+<timestamp>+<random>/`): the collected copies in
submitted/ belong to the instructor. So for each collected submission we find its inbound folder (the
one with the same timestamp.txt, preferring the one with the same notebook, as `collect` picks the
newest per student) and read

- who wrote it: the owners of the folder and of everything in it (a user can create files only as
  themselves; `submit` makes the folder mode 777, so anyone who knows its name can add to it: every
  owner counts);
- when it landed: the latest status-change time (ctime) of the folder and everything in it. A student
  can set the modification time of their own files to anything (`touch -d`), but not the ctime: the
  kernel sets it to "now" on every change, including a `touch`. So the content was in its final state
  no earlier than this time; a student who edits their inbound copy later only moves it later.
  (Copying or restoring the exchange from a backup resets ctimes: grade before that, or expect flags.)
"""

import os
import pwd
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

MAX_ENTRIES = 10000  # files looked at in one inbound folder


@dataclass(frozen=True)
class ExchangeLocation:
    root: Path
    course_id: str

    @property
    def inbound(self) -> Path:
        return self.root / self.course_id / "inbound"


@dataclass(frozen=True)
class Provenance:
    """What the operating system says about one submission in the exchange's inbound folder."""

    folder: Path
    owners: tuple[str, ...]  # user names (or "uid N") owning the folder and its files, sorted
    observed_at: datetime  # the latest ctime of the folder and its files, naive UTC (as nbgrader stores times)


def owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _split_name(name: str) -> tuple[str, str, str] | None:
    """`<student>+<assignment>+<timestamp>+<random>` (or without the random part) -> its three fields."""
    parts = name.rsplit("+", 3)
    if len(parts) == 4:
        return parts[0], parts[1], parts[2]
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    return None


def inbound_candidates(location: ExchangeLocation, student_id: str, assignment_id: str) -> list[Path]:
    """The inbound folders that claim this student and assignment."""
    try:
        entries = list(os.scandir(location.inbound))
    except OSError:
        return []
    found = []
    for entry in entries:
        fields = _split_name(entry.name)
        if fields and fields[0] == student_id and fields[1] == assignment_id and entry.is_dir(follow_symlinks=False):
            found.append(Path(entry.path))
    return found


def _read(path: Path, limit: int = 64 * 1024 * 1024) -> bytes | None:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > limit:
            return None
        return path.read_bytes()
    except OSError:
        return None


def match_inbound(location: ExchangeLocation, student_id: str, assignment_id: str, collected: Path,
                  notebook: Path | None) -> Path | None:
    """The inbound folder `collected` (a submitted/<student>/<assignment>/ folder) was copied from."""
    stamp = _read(collected / "timestamp.txt")
    if stamp is None:
        return None
    same_time = [f for f in inbound_candidates(location, student_id, assignment_id)
                 if _read(f / "timestamp.txt") == stamp]
    if not same_time:
        return None
    if notebook is not None and len(same_time) > 1:
        ours = _read(notebook)
        same_notebook = [f for f in same_time if ours is not None and _read(f / notebook.name) == ours]
        same_time = same_notebook or same_time
    return sorted(same_time, key=lambda f: f.name)[-1]


def provenance(folder: Path) -> Provenance:
    """Owners and the latest ctime of `folder` and everything in it (symbolic links are not followed)."""
    st = os.lstat(folder)
    owners, latest = {st.st_uid}, st.st_ctime
    count = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            count += 1
            if count > MAX_ENTRIES:
                break
            try:
                entry = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            owners.add(entry.st_uid)
            latest = max(latest, entry.st_ctime)
    observed = datetime.fromtimestamp(latest, tz=timezone.utc).replace(tzinfo=None)
    return Provenance(folder, tuple(sorted(owner_name(uid) for uid in owners)), observed)
