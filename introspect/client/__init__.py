"""The controller side of each task: typed request in, typed reply out, printing nothing.

- :mod:`.runner`: :func:`~.runner.run_channels`, the one runner of several remote
  tasks over one connection (a light task and an isolated tokenizer load).
- :mod:`.model`: ``probe``: hub-id resolution, the whole-run deadline, the cache, gather.
- :mod:`.hub`: hub ids resolved to a snapshot in the host's HF cache.
- :mod:`.preflight`, :mod:`.health`, :mod:`.discover`, :mod:`.diff`: the other commands.
- :mod:`.fleet`: the bounded runner of one piece of work per host, logins paced per sshd.
- :mod:`.cache`: the local cache of raw facts, keyed by target and options.

The CLI (:mod:`introspect.cli`) turns flags into these calls and renders what they
return; errors come back as values or :class:`~introspect.errors.IntrospectError`.
"""
