"""`gsrender view`: an interactive browser viewer (viser) that renders with gsrender.rasterize.
Importing this package does not import viser; gsrender.viewer.app (the Viewer) does."""
