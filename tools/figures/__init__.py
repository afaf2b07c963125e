"""The document renderer (report.py) and its table renderers (doc_tables.py, study_figures.py)."""
