"""The course's lab: what the notebooks use to measure, grade and set up, built on the core.

bench (timing engines side by side), evals (the eval sets behind each notebook's table, and the
scripted backend its controls and the tests replay), exercises (graded checks), finetune,
session and colab (a notebook's first cell), doctor, rehearse, explicit_kv (notebook 03's
hand-driven KV cache), diagrams (and the token inspector) and widgets. The core (types, render,
tools, generate, backends, engine, serve) never imports from here."""

# The Python versions the course is tested on (the first cell and `chatlab doctor` check them).
PYTHONS = ((3, 11), (3, 12), (3, 13))
