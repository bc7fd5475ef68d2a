// The page's web worker: a second memviz module with its own copy of the archive, for what would
// stall the page's thread (an archive's categories: a second or so on millions of events).
// Messages: `{ archive }` (the archive's bytes, once), then `{ id, job, device, arg }`, each answered
// `{ id, bytes }` (the answer's bytes: `WorkerHandle::run`) or `{ id, error }`.
import init, { WorkerHandle } from './pkg/memviz_web.js';

const ready = init();
let handle = null, failed = 'no archive yet';

onmessage = async ({ data }) => {
  await ready;
  if (data.archive) {
    try {
      handle = new WorkerHandle(data.archive);
    } catch (e) {
      failed = String(e.message || e);
    }
    return;
  }
  try {
    if (!handle) throw new Error(failed);
    const bytes = handle.run(data.job, data.device, data.arg ?? '');
    postMessage({ id: data.id, bytes }, [bytes.buffer]);
  } catch (e) {
    postMessage({ id: data.id, error: String(e.message || e) });
  }
};
