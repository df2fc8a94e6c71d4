"""``introspect report``: the documents introspect writes, drawn as one self-contained HTML page
(or Markdown) for design docs, tickets and review threads.

- :mod:`.inputs` reads each INPUT (a document, raw facts profiled on the fly, a history database);
- :mod:`.build` sorts them into pages: :mod:`.model_page` (with :mod:`.layer_map` and
  :mod:`.params`), :mod:`.plan_page`, :mod:`.fleet_page` (with :mod:`.history`);
- :mod:`.svg` draws the pictures server-side, :mod:`.render` fills the jinja2 templates.

The pictures are our own few SVG primitives rather than a plotting library: every chart here
is rectangles, text and lines laid out on a grid (layer cells, stacked bars, a status
timeline); a library that renders offline to inline SVG (matplotlib's SVG backend) would add
tens of MB and embed its own glyph paths and ids, for pictures that need none of its axes or
scales, and the cells need ``data-*`` attributes and tooltips it does not write.
"""
