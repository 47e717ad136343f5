"""The course's lab: what the notebooks use to measure, grade, diagnose and set up, built on the core.
The core never imports from here."""

# The Python versions the course is tested on (the first cell and `chatlab doctor` check them).
PYTHONS = ((3, 11), (3, 12), (3, 13))
