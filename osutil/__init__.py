"""Operating-system helpers the harness and the fault injectors share: child processes that
die with us (:mod:`osutil.procs`) and free ports (:mod:`osutil.ports`). Imports nothing of ours."""
