// Synchronous clean-ups for when a test process exits without running its `after` hooks (a
// crash, a cancelled run): one 'exit' listener for all servers, so a test file that starts
// many of them does not trip Node's listener-leak warning.
const pending = new Set<() => void>();

function runAll(): void {
  for (const cleanup of pending) {
    try {
      cleanup();
    } catch {
      /* best effort: the process is exiting */
    }
  }
  pending.clear();
}

/** Registers `cleanup` to run on process exit; the returned function unregisters it. */
export function onProcessExit(cleanup: () => void): () => void {
  if (pending.size === 0) process.once('exit', runAll);
  pending.add(cleanup);
  return () => {
    pending.delete(cleanup);
    if (pending.size === 0) process.removeListener('exit', runAll);
  };
}
