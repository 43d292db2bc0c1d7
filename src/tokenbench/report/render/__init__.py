"""The report drawn: one outline of sections, captions, tables and charts, rendered as HTML (plotly), Markdown and PNG (matplotlib)."""
