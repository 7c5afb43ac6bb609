"""The checks of a written model: the load-check probe, the staged model judged whole, then the sessions its users
build (``users``: probes of its distinct neighbourhoods, ``neighborhoods``; a failure's nodes found by ``bisect``)."""
