"""Running: the student's notebook in a sandbox (the tiers, the warm parent, the runner inside it), and
where grading runs (this process, worker processes, Dask)."""
