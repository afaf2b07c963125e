"""SplitGS-Loc: a compact localization map from a photometric 3DGS and its posed training images
(docs/design.md §7): MoG splitting (split), composition-weight selection (select), descriptor lifting
(lift), matching + PnP (query), evaluation (metrics) and the map file (mapfile)."""
