"""memviz's recorder: CUDA memory snapshots taken from inside the training script.

    import memviz

    with memviz.record("snapshots/"):      # start before the model is built
        for batch in loader:
            with memviz.step():            # one `## step N ##` span per training step
                train_step(batch)

Each rank writes `snapshots/rank{R}.{reason}.pickle` at an out-of-memory error (`oom`, before it
unwinds), at SIGTERM / SIGUSR1 (`signal`), every N steps if asked (`periodic`) and at the end
(`exit`); `memviz index snapshots/`, `memviz ranks snapshots/` and `memviz open` read them as
they are. Callbacks for Lightning and the Hugging Face Trainer: `memviz.lightning` and
`memviz.transformers` (imported only when used).

Importing memviz imports nothing else: torch is loaded when a recording starts, and without torch
or CUDA a recording does nothing but warn once.
"""

from ._record import Recorder, record
from ._steps import Step, step

__all__ = ["record", "step", "Recorder", "Step"]
