"""The demo workload (``tasktrail demo``) and its scenarios: a crew of agents, nightly runs."""

from .workload import DEMO_START_MS, DemoReport, run_demo

__all__ = ["DEMO_START_MS", "DemoReport", "run_demo"]
