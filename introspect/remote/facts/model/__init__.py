"""Facts read from the model's own files: config, weights headers, listing, hashes, its code."""
