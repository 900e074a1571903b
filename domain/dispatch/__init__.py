"""Dispatch runs' commands (SPEC section 3): minting runs, handing them to the host's
executor (adopt-or-submit), scheduled dispatch and reconcile, and the executor calls.
A mixin of the application's ``Scheduler``; it never imports the application."""
