"""Results recorded in batches (autograder.recording.batch): one transaction for many, files after the commit, and a
result whose recording fails is that submission's failure, never the batch's."""

from autograder.recording.batch import BatchRecorder, Pending


class FakeGradebook:
    """Staged writes, committed or rolled back as a transaction would be."""

    def __init__(self):
        self.committed, self.staged, self.commits = {}, {}, 0

    def commit(self):
        self.committed.update(self.staged)
        self.staged.clear()
        self.commits += 1

    def rollback(self):
        self.staged.clear()


def recorder_for(gb, log, every=3, broken_stage=(), broken_files=()):
    failures = []

    def pending(name, failure=False):
        def stage():
            if name in broken_stage:
                raise ValueError(f"cannot stage {name}")
            gb.staged[name] = "failure" if failure else "scores"

        def files():
            if name in broken_files and not failure:
                raise OSError(f"cannot write {name}")
            log.append((name, dict(gb.committed)))  # what the gradebook had committed when its files were written

        return Pending(name, stage, files)

    recorder = BatchRecorder(gb.commit, gb.rollback, lambda p, exc: pending(p.key, failure=True),
                             lambda p, exc: failures.append(p.key), every=every, seconds=600)
    return recorder, pending, failures


def test_results_commit_together_and_their_files_follow_the_commit():
    gb, log = FakeGradebook(), []
    recorder, pending, failures = recorder_for(gb, log)
    for name in "abcde":
        recorder.add(pending(name))
    assert gb.commits == 1 and set(gb.committed) == {"a", "b", "c"} and [n for n, _ in log] == ["a", "b", "c"]
    assert all(name in committed for name, committed in log)  # each file written after its scores were committed
    recorder.flush()
    assert gb.commits == 2 and set(gb.committed) == set("abcde") and not failures


def test_a_result_that_cannot_be_staged_is_its_own_failure_and_the_batch_keeps_the_others():
    gb, log = FakeGradebook(), []
    recorder, pending, failures = recorder_for(gb, log, every=10, broken_stage={"b"})
    for name in "abc":
        recorder.add(pending(name))
    recorder.flush()
    assert gb.committed == {"a": "scores", "c": "scores"} and gb.commits == 1
    assert [n for n, _ in log] == ["a", "c"] and failures == ["b"]  # its failure could not be staged either: reported


def test_a_result_whose_files_fail_gets_its_failure_recorded_in_the_next_transaction():
    gb, log = FakeGradebook(), []
    recorder, pending, failures = recorder_for(gb, log, every=10, broken_files={"b"})
    for name in "abc":
        recorder.add(pending(name))
    recorder.flush()
    assert gb.committed == {"a": "scores", "b": "failure", "c": "scores"} and gb.commits == 2
    assert [n for n, _ in log] == ["a", "c", "b"] and not failures


def test_a_batch_is_due_after_its_oldest_result_has_waited():
    gb, log, now = FakeGradebook(), [], [0.0]
    recorder = BatchRecorder(gb.commit, gb.rollback, lambda p, e: None, lambda p, e: None, every=100, seconds=1.0,
                             clock=lambda: now[0])
    recorder.add(Pending("a", lambda: gb.staged.update(a=1), lambda: log.append("a")))
    now[0] = 0.5
    recorder.heartbeat()
    assert gb.commits == 0
    now[0] = 1.0
    recorder.heartbeat()
    assert gb.commits == 1 and log == ["a"]


def test_a_rollback_leaves_no_object_of_the_undone_transaction_in_the_session(tmp_path):
    """A row the batch inserted and then loaded again (its first instance collected meanwhile: the collector
    decides when) is not new to the transaction, so SQLAlchemy's rollback keeps it, its row gone: touched when the
    batch is staged again it raised ObjectDeletedError (seen once in a full suite run). After our rollback the
    session holds nothing, and the student is written again as if never staged."""
    import gc

    from autograder.recording.gradebook import CourseGradebook

    with CourseGradebook(tmp_path / "gradebook.db") as gb, gb.batch():
        gb.gb.add_student("ana")
        gc.collect()
        loaded = gb.gb.find_student("ana")  # a second instance, loaded from the row this transaction inserted
        gb.rollback()
        assert loaded not in gb.gb.db()
        assert gb.roster() == []
        gb.gb.add_student("ana", first_name="Ana")
        gb.commit()
        assert gb.gb.find_student("ana").first_name == "Ana"
