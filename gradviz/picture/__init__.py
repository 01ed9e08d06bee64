"""The picture: what every view of one (trace, findings) shows, each presentation fact derived once.

A floor of its own between the analysis and the media: it may import the trace model and the analysis; the
renderers (render/: DOT and images) and the page document (explorer/document.py) read it and never derive a
presentation fact again. Nothing is imported here, so that reading one module (the palette) stays light."""
