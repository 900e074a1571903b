"""Schedules (the Service API issue, item 6): a named cron schedule that submits one task
per tick, exactly once across a fleet. A subdomain: its events on a stream of its own
(``cron:<name>``), their fold, and the pure decisions that record, remove and tick one;
the commands a host calls are :mod:`..service.schedules`'."""
