"""pyvta: the command-line front end of the stack (``pyvta --help``)."""

__version__ = "0.1.0"
