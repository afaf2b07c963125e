"""SplitGS-Loc studies: trained (trained-model scenes), synthetic (hand-built rooms), real (a real
scene's held-out photos), footprint_texture and retrieval_scaling (the measurements behind two of
the pipeline's defaults)."""
