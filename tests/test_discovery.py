"""Finding submissions: nbgrader's layout, flat folders, LMS zips (safely), the student filter."""

import zipfile

import pytest

from autograder.intake.discovery import DiscoveryError, course_root, find_submissions


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


def _class_zip(path, students=("alice", "bob", "carol")):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for student in students:
            zf.writestr(f"{student}_rmsnorm.ipynb", '{"cells": [], "x": "%s"}' % ("student work " * 2000))
    return path


def test_a_damaged_zip_is_refused_whole_with_what_to_do_and_nothing_stays_unpacked(tmp_path):
    """A download whose member fails its check (bytes flipped in transit) or that was cut short: a clear error, never
    a traceback or a class graded without the damaged member's student (who would score as missing)."""
    archive = _class_zip(tmp_path / "lms.zip")
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as zf:
        second = zf.infolist()[1]
    start = second.header_offset + 30 + len(second.filename) + 20  # inside bob's compressed data
    data[start:start + 50] = bytes(b ^ 0xFF for b in data[start:start + 50])
    damaged = tmp_path / "damaged.zip"
    damaged.write_bytes(bytes(data))
    with pytest.raises(DiscoveryError, match="bob_rmsnorm.ipynb.*download it again"):
        find_submissions(damaged, ["rmsnorm"], unpack_to=tmp_path / "unpacked")
    assert not (tmp_path / "unpacked" / "damaged").exists()

    cut = tmp_path / "cut.zip"
    cut.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(DiscoveryError, match="cut short or damaged.*download it again"):
        find_submissions(cut, ["rmsnorm"], unpack_to=tmp_path / "unpacked")
    assert [f.student_id for f in find_submissions(archive, ["rmsnorm"], unpack_to=tmp_path / "unpacked")] == [
        "alice", "bob", "carol"]  # the whole download, intact


def test_missing_and_unreadable_sources_are_clear_errors(tmp_path):
    with pytest.raises(DiscoveryError, match="no such file"):
        find_submissions(tmp_path / "nope", ["rmsnorm"])
    not_zip = tmp_path / "grades.txt"
    not_zip.write_text("x")
    with pytest.raises(DiscoveryError, match="not a folder and not a zip"):
        find_submissions(not_zip, ["rmsnorm"], unpack_to=tmp_path / "u")


# --- issue 13: every notebook found, skipped with a reason, or in conflict; LMS names ---------------------------

from autograder.intake.discovery import discover  # noqa: E402
from autograder.intake.lms import parse_canvas_name, parse_moodle_name, students_own_name  # noqa: E402


def accounted(result, root):
    """Every notebook under root is found, skipped or in a conflict: none silently dropped."""
    seen = {f.notebook for f in result.found} | {s.notebook for s in result.skipped} | {
        p for c in result.conflicts for p in c.notebooks}
    assert seen == set(root.rglob("*.ipynb"))


def test_flat_folder_two_files_for_one_student_are_a_conflict(tmp_path):
    touch(tmp_path / "alice_rmsnorm.ipynb")
    touch(tmp_path / "sub" / "alice-rmsnorm.ipynb")
    touch(tmp_path / "bob_rmsnorm.ipynb")
    touch(tmp_path / "carol" / "rmsnorm.ipynb")  # the usual name inside a student's folder: the folder names her
    touch(tmp_path / "notes.ipynb")
    touch(tmp_path / "dave_rope.ipynb")  # another assignment than asked for
    result = discover(tmp_path, ["rmsnorm", "swiglu"])
    assert [(f.student_id, f.how) for f in result.found] == [("bob", "file name"), ("carol", "folder name")]
    assert [(c.student_id, c.assignment_id, len(c.notebooks)) for c in result.conflicts] == [("alice", "rmsnorm", 2)]
    accounted(result, tmp_path)
    lines = "\n".join(result.lines())
    assert "conflict: alice/rmsnorm not graded (its stored result is kept)" in lines
    assert "skipped notes.ipynb: its name holds none of the assignment ids" in lines
    assert "skipped 1 notebook(s) of assignments not asked for" in lines


def test_canvas_names(tmp_path):
    assert parse_canvas_name("wangfang_12345_67890_rmsnorm.ipynb").user_id == "12345"
    late = parse_canvas_name("wangfang_late_12345_67891_rmsnorm-2.ipynb")
    assert late.late and late.attachment_id == 67891 and students_own_name(late.file) == "rmsnorm.ipynb"
    assert parse_canvas_name("alice_rmsnorm.ipynb") is None
    assert parse_canvas_name("x_1_2_alice_99_98_rmsnorm.ipynb").user_id == "1"  # the LMS's part comes first
    for name in ("b_7_1_rmsnorm.ipynb", "b_7_3_rmsnorm-1.ipynb", "b_7_2_alice_rmsnorm.ipynb", "c_8_4_a.ipynb",
                 "c_8_5_b.ipynb", "readme.ipynb"):
        touch(tmp_path / name)
    result = discover(tmp_path, ["rmsnorm"], layout="canvas")
    assert [(f.student_id, f.notebook.name, f.unmapped) for f in result.found] == [
        ("canvas:7", "b_7_3_rmsnorm-1.ipynb", True)]  # the latest upload named after the assignment
    assert [c.student_id for c in result.conflicts] == ["canvas:8"]  # two notebooks, none named rmsnorm.ipynb
    accounted(result, tmp_path)
    assert any("readme.ipynb: not named as Canvas names" in line for line in result.lines())


def test_moodle_names_and_a_download_of_one_assignment(tmp_path):
    folder = parse_moodle_name("Wang Fang_1234_assignsubmission_file_")
    assert (folder.full_name, folder.participant_id, folder.plugin, folder.file) == ("Wang Fang", "1234", "file", "")
    flat = parse_moodle_name("Wang Fang_1234_assignsubmission_file_rmsnorm.ipynb")
    assert flat.file == "rmsnorm.ipynb"
    touch(tmp_path / "Wang Fang_1234_assignsubmission_file_" / "rmsnorm.ipynb")
    touch(tmp_path / "Li Lei_77_assignsubmission_file_rmsnorm (1).ipynb")
    result = discover(tmp_path, ["rmsnorm"])
    assert result.layout == "moodle"
    assert sorted(f.student_id for f in result.found) == ["moodle:1234", "moodle:77"]
    with pytest.raises(DiscoveryError, match="holds one assignment"):
        discover(tmp_path, ["rmsnorm", "rope"], layout="moodle")
    with pytest.raises(DiscoveryError, match="unknown layout"):
        discover(tmp_path, ["rmsnorm"], layout="blackboard")


def test_a_moodle_submission_with_a_second_upload_of_the_notebook_is_graded_by_the_latest(tmp_path):
    """Moodle's file manager names a second upload of `rmsnorm.ipynb` into the same submission `rmsnorm (1).ipynb`
    (a re-upload that kept the first): the latest upload is graded, as Canvas's `rmsnorm-1.ipynb` is, and the first is
    skipped with a line. Two files of the same upload number (in subfolders) stay a conflict."""
    bob = tmp_path / "Bob_12_assignsubmission_file_"
    touch(bob / "rmsnorm.ipynb")
    touch(bob / "rmsnorm (1).ipynb")
    touch(bob / "rmsnorm (2).ipynb")
    carol = tmp_path / "Carol_13_assignsubmission_file_"
    touch(carol / "a" / "rmsnorm.ipynb")
    touch(carol / "b" / "rmsnorm.ipynb")
    result = discover(tmp_path, ["rmsnorm"], layout="moodle")
    assert [(f.student_id, f.notebook.name) for f in result.found] == [("moodle:12", "rmsnorm (2).ipynb")]
    assert sorted(s.notebook.name for s in result.skipped) == ["rmsnorm (1).ipynb", "rmsnorm.ipynb"]
    assert [c.student_id for c in result.conflicts] == ["moodle:13"]
    accounted(result, tmp_path)


def test_a_canvas_download_is_recognised_even_with_a_stray_file(tmp_path):
    touch(tmp_path / "wangfang_12345_67890_rmsnorm.ipynb")
    touch(tmp_path / "lilei_late_222_333_homework.ipynb")
    touch(tmp_path / "instructions_rmsnorm.ipynb")
    result = discover(tmp_path, ["rmsnorm"])
    assert result.layout == "canvas"
    assert sorted(f.student_id for f in result.found) == ["canvas:12345", "canvas:222"]  # never wangfang_12345_67890
    assert [s.notebook.name for s in result.skipped] == ["instructions_rmsnorm.ipynb"]
