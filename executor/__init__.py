"""Runs a mapping tile by tile in numpy, in the declared number formats, and compares it with the reference."""

from executor.validate import ValidationReport, ValidationTooLarge, validate, validate_as_run, validate_sharded_conv

__all__ = ["ValidationReport", "ValidationTooLarge", "validate", "validate_as_run", "validate_sharded_conv"]
