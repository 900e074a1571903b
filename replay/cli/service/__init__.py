"""The commands of the Service API (issue 42): what a service asks of its tasks, from a
shell (``tasktrail result``). A room of its own beside the other commands."""
