import type { BatchReplicator, ServerBatch } from '../../src/store/store.js';

/** An HA leader's replicator that only records the batches a store sends (a leader with no follower to wait for). */
export function recordingReplicator(term: number): BatchReplicator & { batches: ServerBatch[] } {
  const batches: ServerBatch[] = [];
  return {
    batches,
    checkLeadership: () => undefined,
    term: () => term,
    replicate: async (batch) => void batches.push(batch),
    localWriteFailed: () => undefined,
  };
}
