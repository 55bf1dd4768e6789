"""The job runners, above the engine: where grading happens (executors.py: worker processes here, or Dask) and a
grading worker (worker.py: one pytest session and one warm sandbox parent over a stream of jobs)."""
