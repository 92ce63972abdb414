"""The project's error types. Every layer raises these (or subclasses), never a bare IndexError."""


class PyvtaError(Exception):
    """Base of every error pyvta raises on purpose."""


class ConfigError(PyvtaError, ValueError):
    """A hardware configuration that is out of range or does not fit the instruction formats."""


class FieldRangeError(PyvtaError, ValueError):
    """A value that does not fit its instruction or micro-op field."""


class DecodeError(PyvtaError, ValueError):
    """A word that is not a valid instruction or micro-op."""
