"""The options of a conversion: the groups each stage reads, each checking its own fields."""
