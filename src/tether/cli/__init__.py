"""The ``tether`` command line; ``tether.cli.app.main`` is the entry point. Nothing heavy is imported here."""
