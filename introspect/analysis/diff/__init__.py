"""Profiles side by side: diff of two, compare of many."""
