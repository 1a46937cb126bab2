"""Benchmarks, run from the repository root as modules: ``python -m benchmarks.NAME``.

Running them as modules keeps ``benchmarks/`` off the front of ``sys.path``, where a
script named like a package (``mechanisms.py``, ``audits.py``) would shadow it.
"""
