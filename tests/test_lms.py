"""The LMS's files read and written without grading: rosters recognised or refused with a clear message, ids mapped
to nbgrader's roster, the gradebooks filled in as they came, every text cell spreadsheet-safe."""

import csv
import io

import pytest

from autograder.intake.lms import LmsError, map_student, read_export
from autograder.recording.lms_export import fill_gradebook

CANVAS = ("Student,ID,SIS User ID,SIS Login ID,Section,RMSNorm rmsnorm (77),rmsnorm quiz (78)\n"
          "    Points Possible,,,,,10,1\n"
          '"Zhang, Alice",0101,S1,alice@uni.edu,A,,\n'
          '"Li, Bob",102,bob,,A,,\n'
          '"+Eve",103,,eve,A,,\n')


def write(tmp_path, name, text, bom=False):
    path = tmp_path / name
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return path


def test_ids_map_by_key_column_email_and_user_name(tmp_path):
    export = read_export(write(tmp_path, "c.csv", CANVAS))
    assert export.kind == "canvas" and sorted(export.students) == ["101", "102", "103"]  # leading zeros dropped
    roster = {"alice": "alice@uni.edu", "bob": "", "eve": ""}
    assert map_student("canvas", "102", export, roster).how == "Canvas user 102 -> SIS User ID 'bob'"
    assert map_student("canvas", "101", export, {"a1": "alice@uni.edu"}).student_id == "a1"  # the roster's email
    assert map_student("canvas", "101", export, {"alice": ""}).student_id == "alice"  # the email's user name
    nobody = map_student("canvas", "555", export, roster)
    assert (nobody.student_id, nobody.unmapped) == ("canvas:555", True)
    assert "no roster" in map_student("canvas", "101", export, {}).how
    assert map_student("moodle", "101", export, roster).unmapped  # a Canvas export cannot map Moodle ids


@pytest.mark.parametrize("text,message", [
    ("name,score\nalice,1\n", "neither a Canvas gradebook export"),
    ("", "empty"),
    ("Student,ID,SIS Login ID\n\"" + "x" * 200_000 + "\"\n", "not a readable CSV"),  # a field over csv's limit
])
def test_a_file_that_is_no_lms_export_is_refused_clearly(tmp_path, text, message):
    with pytest.raises(LmsError, match=message):
        read_export(write(tmp_path, "x.csv", text))


def test_not_utf8_and_not_a_file(tmp_path):
    (tmp_path / "latin1.csv").write_bytes("Identifier,Full name\nParticipant 1,Jos\xe9\n".encode("latin-1"))
    with pytest.raises(LmsError, match="not UTF-8"):
        read_export(tmp_path / "latin1.csv")
    with pytest.raises(LmsError, match="cannot read"):
        read_export(tmp_path)


def test_the_canvas_column_is_found_or_named(tmp_path):
    export = read_export(write(tmp_path, "c.csv", CANVAS, bom=True))
    with pytest.raises(LmsError, match="several columns named after 'rmsnorm'.*--lms-column"):
        fill_gradebook(export, "rmsnorm", {}, {}, tmp_path / "out.csv")
    report = fill_gradebook(export, "rmsnorm", {"alice": 9.5, "eve": 3}, {"alice": "alice@uni.edu", "eve": ""},
                            tmp_path / "out.csv", column="RMSNorm rmsnorm (77)")
    assert (report.filled, report.unmapped) == (2, ["Li, Bob (102)"])
    data = (tmp_path / "out.csv").read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"))))
    assert rows[1] == ["    Points Possible", "", "", "", "", "10", "1"]
    assert rows[2][5] == "9.5" and rows[3][5] == "" and rows[4][:2] == ["'+Eve", "103"] and rows[4][5] == "3"
    assert rows[2][1] == "0101"  # the LMS's own cells as they were
