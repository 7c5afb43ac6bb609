"""``python -m ampconv``: the ``ampconv`` command, for when the console script is not on PATH."""

from ampconv_cli.main import main

if __name__ == "__main__":
    main()
