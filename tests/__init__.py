"""The test suite as a regular package.

A regular package here takes precedence over any top-level ``tests`` package that a
dependency installs into site-packages (diffprivlib 0.6 ships one): without this file the
suite is a namespace package, which any installed regular ``tests`` shadows, and worker
processes that unpickle test functions by module name (``tests.dpglm...``) fail.
"""
