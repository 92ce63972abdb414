"""Lowering from schedules to loop IR (bound inference, loop nests)."""
