"""The `gsrender` command line: gsrender.cli.main.main (the console script and `python -m gsrender`).

common   CliError, device choice, the scene loader, shared render options
demo, render, info, bench, view, loc, voda   one module per command group (train: gsrender.train.run)
This file imports nothing, so a command module (or the trainer's viewer hook) importing
gsrender.cli.common pulls in no other command: no import cycle.
"""
