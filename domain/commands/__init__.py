"""The scheduler's commands, one group a module (tasks, submits, forks, turns, cleanups,
batches, snapshots, seals), and the decision cycle that runs each one: decided on the
world, appended, folded (``decision.py``, ``group_commit.py``, ``group_append.py``).
Each group is a mixin the application's ``Scheduler`` is made of; nothing here imports
the application (``domain/app/``) or dispatch (``domain/dispatch/``)."""
