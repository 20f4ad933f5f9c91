"""Entry module Airflow's plugin loader finds in the plugins folder (it imports each ``.py``
file by its stem and registers the ``AirflowPlugin`` subclasses it holds). The plugin itself
is the ``tidegate_ui`` package beside this file; the plugins folder is on ``sys.path``."""

from tidegate_ui.plugin import TidegatePlugin

__all__ = ["TidegatePlugin"]
