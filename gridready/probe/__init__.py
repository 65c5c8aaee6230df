"""The node probe: runs ON a GPU node with only the Python stdlib (+ torch / pynvml when importable).

It measures and records; it never judges. `python3 -m gridready.probe --profile quick` (or, copied as a directory,
`python3 -m gridready_probe`) prints ONE JSON document: raw tool outputs as evidence plus parsed measurements.
All imports inside this package are relative so that the directory can be copied on its own.
"""

SCHEMA = "gridready.probe/1"
