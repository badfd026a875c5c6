"""``python -m tether``: the ``tether`` command, with the same options and exit codes."""

from tether.cli.app import main

if __name__ == "__main__":
    main()
