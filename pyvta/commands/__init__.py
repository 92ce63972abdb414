"""One module per ``pyvta`` subcommand."""
