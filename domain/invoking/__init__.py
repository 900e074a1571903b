"""Running invocations (issue 43): an invocation's run through its phases as steps
(``phase_steps``), calling a handler (``phase_calls``), the drivers that perform the
steps (a thread's, in ``phase_steps``; an event loop's coroutine, ``loop_invocations``),
the daemon pools and loop thread a worker runs them on (``threads``), and how a
coroutine's decisions reach the group commit without holding its loop
(``loop_commit``, ``awaitable_commands``). Below the application (``domain/app/``),
above the service and the commands it builds on; it never imports the application."""
