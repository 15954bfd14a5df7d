"""``python -m memorist``: the same as the ``memorist`` command."""

from .cli import main

if __name__ == "__main__":
    main()
