"""Experiments: bring the emulated RNICs and switches up on a testbed, run a
scenario's traffic, and write results/<run-id>/ (config, series, summary,
plots). Sits above testbed/, dataplane/ and control/."""
