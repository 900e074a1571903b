"""What the console reads: the store folded and kept current (:mod:`.follow`), across
its archive or not (:mod:`.archived`), the task list (:mod:`.listing`), a task's page
(:mod:`.task_view`) and the fleet's (:mod:`.fleet`). Nothing here draws HTML or knows
the web server."""
