"""One module per command, each with `register(app)`; cli.py registers every module found here."""
