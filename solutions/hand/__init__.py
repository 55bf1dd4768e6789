"""The hand computations of the assignments that have one: solutions/hand/<id>.py, without torch."""
