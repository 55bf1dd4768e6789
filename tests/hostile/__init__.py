"""The hostile-submission corpus: every strange or cheating submission the grader must survive (corpus.py)."""
