"""ACEP stream transactions (the paper's sections 4 and 5): shared tables
with versions (tables.py), one actor's step of an s-transaction (steps.py),
the SEI, S2PL and LWM schedulers (schedulers.py), and executors that run
the steps serially (the oracle), interleaved by a deterministic simulator,
or on threads (executors.py). processor.py binds them to the pipeline."""
