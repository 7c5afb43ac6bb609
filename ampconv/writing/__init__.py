"""Writing a model: the streaming writer, output-path guards, staging and atomic publishing."""
