"""Hooks: :mod:`.tidegate` (``TidegateHook``, the ``tidegate`` connection type)."""
