"""The ``memci`` command: :mod:`~memci.cli.main` parses; ``demo``, ``demo_array`` and
``demo_conversation`` are the demos; :mod:`~memci.cli.inspect` shows what a store holds."""
