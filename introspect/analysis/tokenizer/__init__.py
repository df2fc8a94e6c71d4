"""The tokenizer section: AutoTokenizer's verdict, loaded facts, the files fallback and their findings."""
