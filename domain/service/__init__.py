"""What a service asks of its tasks (the Service API issue): results, keys, messages,
retries, priorities and schedules, as command groups the application's ``Scheduler`` is
made of. Below the application (``domain/app/``), above the commands it builds on
(``domain/commands/``, ``domain/dispatch/``); it never imports the application."""
