"""The application: the ``Scheduler`` assembled from the command groups
(``domain/commands/``, ``domain/dispatch/``), and the machinery that runs phases (passes,
invocations, phase calls, the fleet's leases and recovery, the worker and its loop)."""
