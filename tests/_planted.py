"""What the planted-bug tests share."""

#: Seconds Hypothesis may shrink a planted bug's failure (``RunOptions.shrink_budget_s``); the
#: runner's replay pass then makes the program 1-minimal. Unbounded, Hypothesis replays for up to
#: five minutes, each replay a whole example on a real engine.
PLANTED_SHRINK_S = 20.0
