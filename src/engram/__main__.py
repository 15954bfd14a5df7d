"""``python -m engram``: the same as the ``engram`` command."""

from .cli import main

if __name__ == "__main__":
    main()
