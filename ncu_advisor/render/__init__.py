"""Renderers: text, JSON and the self-contained HTML report, all from one analysis result."""
