"""Where work runs and where results go: the execution engine shared by the sweeps
(:mod:`dpglm.experiments`) and the audits (:mod:`audits`), below both (docs/engine.md).

:mod:`dpglm.engine.engine` maps a function over tasks in this process, worker processes or
dask; :mod:`dpglm.engine.results` writes tables (CSV, parquet), strict JSON and manifests.
Nothing here imports a numerical library at import time.
"""
