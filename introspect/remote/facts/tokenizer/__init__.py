"""Facts read from the tokenizer's files, or from the tokenizer loaded in isolation."""
