"""The command line of the Service API (issue 42): what a service, or its operator, asks of
its tasks from a shell (``tasktrail result``, ``send``, ``schedules``, ``schedule``,
``unschedule``). A room of its own: the CLI's (``replay/cli/``) is at its size bound."""
