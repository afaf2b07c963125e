"""Measuring the renderer: `gsrender bench` (fps, the FPS profiling harness) and the timing,
memory and environment helpers it shares with the scripts in benchmarks/ and studies/ (measure).

    from gsrender.bench import fps
    fps.main(["--smoke", "--out", "out/fps"])
"""
