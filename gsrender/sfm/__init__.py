"""Photos → a COLMAP model in the Mip-NeRF 360 release's layout (`gsrender prepare`), with pycolmap."""
