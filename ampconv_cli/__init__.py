"""ampconv command-line front end (installed as package ``ampconv_cli``)."""
