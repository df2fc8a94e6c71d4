"""The remote side: standard-library-only modules shipped as source to the host's interpreter.

``runner`` (entry point, one framed reply) -> ``tasks.<task>.run(request)`` (one module per
wire task) -> ``facts.*`` (one module per raw section or reader). ``contract`` holds the
protocol, frames, defaults, shared tables and error records; ``wire`` and ``sections`` the
shapes it re-exports. Nothing here may import outside this package or the standard library.
"""
