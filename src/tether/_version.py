"""tether's version, written once: the package metadata reads it from here (pyproject.toml), and every module that
names it (``tether.__version__``, the CLI's ``--version``, the telemetry's scope, the MCP client's name) imports it
from here, downward."""

__version__ = "0.1.0"
