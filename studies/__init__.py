"""The application studies: the protocols that measure VODA (studies/voda) and SplitGS-Loc
(studies/loc) on seeded scenes, their scene generator (scenes: trained-model scenes) and their
reports (studies/voda/REPORT.md, studies/loc/REPORT.md). They use the package; the package never
uses them. Their results files live in benchmarks/results/ beside the benchmarks' (the document
renderer, tools/figures/report.py, reads them all from there)."""
