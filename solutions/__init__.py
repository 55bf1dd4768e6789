"""Hidden reference implementations for the chapter "从 GPT-2 到现代模型".

One module per assignment; names and signatures are the ones the students see in `release/`.
The solution cells of `assignments/` are copies of these objects, kept equal by
`python -m autograder.sync_solutions` (and checked by `tests/test_solution_sync.py`).

Regions between `### BEGIN SOLUTION` and `### END SOLUTION` are what nbgrader removes from the
student's notebook; everything outside them (signatures, docstrings) is what the student is given.
"""

ASSIGNMENTS = ("rmsnorm", "gqa_saving", "gradient_flow", "rope", "swiglu", "mla", "llama_block")
