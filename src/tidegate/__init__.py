"""Tidegate: event-time streaming jobs that are correct under disorder and repeatable after recovery."""

__version__ = "0.7.0"
