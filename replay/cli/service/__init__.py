"""The command line of the Service API (issue 42): what a service's operator asks of its
tasks beside the acts of :mod:`..act_commands` (schedules, ...). A room of its own: the
CLI's (``replay/cli/``) is at its size bound."""
