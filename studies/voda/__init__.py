"""VODA studies: trained (the trained-model protocol), flips (what VODA changes per object),
removal3d (the hand-built Removal-3D protocol and its sweeps), report (its tables and plots)."""
