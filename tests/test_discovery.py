"""Finding submissions: nbgrader's layout, flat folders, LMS zips (safely), the student filter."""

import zipfile

import pytest

from autograder.discovery import DiscoveryError, course_root, find_submissions


def touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    return path


def test_nbgrader_layout_and_the_student_filter(tmp_path):
    for student in ("alice", "bob", "Zhang Wei"):
        touch(tmp_path / "submitted" / student / "rmsnorm" / "rmsnorm.ipynb")
    touch(tmp_path / "submitted" / "alice" / "rope" / "rope.ipynb")
    (tmp_path / "nbgrader_config.py").write_text("")
    found = find_submissions(tmp_path / "submitted", ["rmsnorm", "rope"])
    assert [(f.student_id, f.assignment_id) for f in found] == [
        ("Zhang Wei", "rmsnorm"), ("alice", "rmsnorm"), ("alice", "rope"), ("bob", "rmsnorm")]
    only = find_submissions(tmp_path / "submitted", ["rmsnorm"], students={"bob"})
    assert [f.student_id for f in only] == ["bob"]
    assert course_root(tmp_path / "submitted") == tmp_path.resolve()
    assert find_submissions(tmp_path, ["rmsnorm"])[0].folder is not None  # the course folder itself works too


def test_flat_folder_names(tmp_path):
    touch(tmp_path / "alice_rmsnorm.ipynb")
    touch(tmp_path / "bob-rope.ipynb")
    found = find_submissions(tmp_path, ["rmsnorm", "rope"])
    assert sorted((f.student_id, f.assignment_id) for f in found) == [("alice", "rmsnorm"), ("bob", "rope")]
    single = tmp_path / "single"
    touch(single / "carol.ipynb")
    assert [(f.student_id, f.assignment_id) for f in find_submissions(single, ["swiglu"])] == [("carol", "swiglu")]


def test_a_zip_is_unpacked_and_graded_like_a_folder(tmp_path):
    archive = tmp_path / "lms.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("alice_rmsnorm.ipynb", "{}")
        zf.writestr("bob_rmsnorm.ipynb", "{}")
    found = find_submissions(archive, ["rmsnorm"], unpack_to=tmp_path / "unpacked")
    assert [f.student_id for f in found] == ["alice", "bob"]


@pytest.mark.parametrize("name", ["../evil_rmsnorm.ipynb", "/abs/evil_rmsnorm.ipynb", "a/../../evil_rmsnorm.ipynb"])
def test_a_zip_member_outside_the_archive_is_refused(tmp_path, name):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(name, "{}")
    with pytest.raises(DiscoveryError, match="outside the archive"):
        find_submissions(archive, ["rmsnorm"], unpack_to=tmp_path / "unpacked")
    assert not (tmp_path / "evil_rmsnorm.ipynb").exists()


def test_missing_and_unreadable_sources_are_clear_errors(tmp_path):
    with pytest.raises(DiscoveryError, match="no such file"):
        find_submissions(tmp_path / "nope", ["rmsnorm"])
    not_zip = tmp_path / "grades.txt"
    not_zip.write_text("x")
    with pytest.raises(DiscoveryError, match="not a folder and not a zip"):
        find_submissions(not_zip, ["rmsnorm"], unpack_to=tmp_path / "u")
