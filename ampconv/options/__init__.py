"""The options of a conversion, each declared once (``declared``: the ``Option`` record; ``conversion``: every
option), and the groups each stage reads (``groups``), each checking the fields that go together."""
