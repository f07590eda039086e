"""The lock guarding every producer batch's done flag, done callbacks and
event (``ProducerBatch.complete``, ``wait``, the futures' done callbacks,
and the senderloop twin's ``accumulator_complete_batch``): one object
whichever twin completes a batch, so it lives outside both."""
import threading

# Guards every batch's completion against its waiters and done callbacks.
# One lock for all batches rather than a lock and an Event per batch: a
# batch is created per batch.size bytes on the application's thread, and
# most batches are never waited on (send() without get()), so their Event
# is made only when a future waits (see ProducerBatch.wait).
DONE_LOCK = threading.Lock()
