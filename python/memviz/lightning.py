"""`MemvizCallback` for Lightning: `memviz.record` around a Trainer's run, a step per batch.

    from memviz.lightning import MemvizCallback
    trainer = Trainer(callbacks=[MemvizCallback("snapshots/")])

Imports `lightning.pytorch`, else `pytorch_lightning` (the callback subclasses that package's
`Callback`, which its Trainer checks for).
"""

try:
    from lightning.pytorch import Callback
except ImportError:
    try:
        from pytorch_lightning import Callback
    except ImportError as e:
        raise ImportError("memviz.lightning needs Lightning: pip install lightning") from e

from ._record import Recorder
from ._steps import OpenStep


class MemvizCallback(Callback):
    """Records the Trainer's first stage (fit, validate, test or predict) into `out`.

    Recording starts in `setup`, before the strategy moves the model to the GPU, and stops at
    that stage's `teardown` (or `on_exception`). Each training batch is one `## step N ##`.
    SIGTERM / SIGUSR1 are handled from `on_train_start`, after Lightning installed its own
    handlers (its SLURM requeue handler is installed only where none is): ours dump, then call
    Lightning's. `options` are `memviz.record`'s.
    """

    def __init__(self, out="memviz_snapshots", **options):
        self._out = out
        self._options = options
        self._recorder = None  # made in setup, in the process that trains (ddp_spawn pickles us before)
        self._stage = None
        self._step = OpenStep()

    def setup(self, trainer, pl_module, stage):
        if self._recorder is None:
            self._stage = stage
            self._recorder = Recorder(self._out, **self._options).start(signals=False)

    def on_train_start(self, trainer, pl_module):
        if self._recorder is not None:
            self._recorder.handle_signals()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._step.begin()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._step.end()

    def on_exception(self, trainer, pl_module, exception):
        self._stop()

    def teardown(self, trainer, pl_module, stage):
        if stage == self._stage:
            self._stop()

    def _stop(self):
        self._step.end(ok=False)
        if self._recorder is not None:
            self._recorder.stop()
