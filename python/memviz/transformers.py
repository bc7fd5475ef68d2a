"""`MemvizCallback` for the Hugging Face `Trainer`: `memviz.record` from the callback's creation
to the end of training, one `## step N ##` per optimizer step (numbered by `global_step`).

    from memviz.transformers import MemvizCallback
    trainer = Trainer(model, args, train_dataset=ds, callbacks=[MemvizCallback("snapshots/")])
"""

try:
    from transformers import TrainerCallback
except ImportError as e:
    raise ImportError("memviz.transformers needs transformers: pip install transformers") from e

from ._record import Recorder
from ._steps import OpenStep


class MemvizCallback(TrainerCallback):
    """Records into `out` from its creation — made in the `Trainer(...)` call, that is before the
    Trainer moves the model to the GPU — until `on_train_end` (or the interpreter's exit, if
    training ends in an exception: the Trainer has no hook for that). Each optimizer step
    (`on_step_begin` to `on_step_end`, all its gradient-accumulation micro-batches) is one
    `## step N ##`, N being the Trainer's `global_step`. `options` are `memviz.record`'s.
    """

    def __init__(self, out="memviz_snapshots", **options):
        self._recorder = Recorder(out, **options).start()
        self._step = OpenStep()

    def on_step_begin(self, args, state, control, **kwargs):
        self._step.begin(state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        self._step.end()

    def on_train_end(self, args, state, control, **kwargs):
        self._step.end(ok=False)
        self._recorder.stop()
